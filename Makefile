# The two commands of the quick start: `make demo` and `make test`.
# Both install missing Debian packages, configure with CMake presets and build.

DEBIAN_PACKAGES := cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev
BENCH_PACKAGES  := libbenchmark-dev libdnnl-dev
SANITIZER_PACKAGES := clang libclang-rt-14-dev
FUZZ_SECONDS    ?= 60
# WERROR=ON: compiler warnings fail the build (`make test WERROR=ON`, as CI does once).
# Unset, the build folder keeps its setting, so a later `make test-torch` does
# not reconfigure (and rebuild) what `make test WERROR=ON` built.
WERROR          ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-python test-torch test-asan bench bench-model bench-memory fuzz conformance clean

all: build

# Installs only what is missing (dpkg -s), so a ready machine never touches apt.
define install_missing
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEBIAN_PACKAGES))

build: deps
	cmake --preset release $(if $(WERROR),-DMIXQ_WERROR=$(WERROR)) >/dev/null
	cmake --build --preset release

demo: build
	@./scripts/demo.sh $(CHECKPOINT)

# Kernel paths the CPU lacks are skipped and listed by kernel_paths.sh;
# MIXQ_REQUIRE_ISA=auto (CI) fails the run if an AVX-512 machine skipped one.
test: build
	rm -f build/release/test-tmp/kernel-paths.log
	ctest --preset release
	./scripts/check_install.sh
	./scripts/kernel_paths.sh
	./scripts/python_test.sh

# The Python package alone (venv under build/venv, pytest).
test-python: build
	./scripts/python_test.sh

# mixq.torch, the comfy-kitchen backend and a diffusers FLUX transformer end to
# end (venv build/venv with PyTorch, comfy-kitchen, diffusers: ~4.5 GB
# downloaded once; not part of `make test`).
test-torch: build
	./scripts/torch_test.sh

# Cross-check against comfy-kitchen (same environment as test-torch).
conformance: build
	./conformance/run.sh

# The whole-model benchmark (FLUX transformer, hidden 3072; see BENCHMARKS.md).
bench-model: build
	./scripts/torch_test.sh --install-only
	build/venv/bin/python bench/flux_forward.py $(BENCH_MODEL_ARGS)

# Resident memory and load time of FLUX.1-dev-sized checkpoints (written once
# to build/bench-memory, ~8 GB per variant; see BENCHMARKS.md). Needs RAM for
# the model once: BENCH_MEMORY_ARGS="--variant fp8" loads ~12 GB.
bench-memory: build
	@echo "commit $$(git rev-parse --short HEAD)"
	build/release/bin/mixq-bench-memory --dir build/bench-memory $(BENCH_MEMORY_ARGS)

# The sanitizer build (clang, ASan + UBSan, preset `asan`) holds both the test
# suite and the libFuzzer targets, so CI compiles the library with sanitizers once.
test-asan:
	$(call install_missing,$(DEBIAN_PACKAGES) $(SANITIZER_PACKAGES))
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan

bench:
	$(call install_missing,$(DEBIAN_PACKAGES) $(BENCH_PACKAGES))
	cmake --preset bench >/dev/null
	cmake --build --preset bench
	./scripts/bench.sh

# Every libFuzzer target for FUZZ_SECONDS in all (split evenly), seeded by
# fuzz/make_corpus.py; findings stop the run (exit status non-zero).
FUZZ_TARGETS := checkpoint marker npy layers quantize
fuzz:
	$(call install_missing,$(DEBIAN_PACKAGES) $(SANITIZER_PACKAGES))
	cmake --preset asan >/dev/null
	cmake --build --preset asan --target mixq-cli $(addprefix fuzz_,$(FUZZ_TARGETS))
	python3 fuzz/make_corpus.py build/asan/fuzz-seeds build/asan/bin/mixq
	@per=$$(( $(FUZZ_SECONDS) / $(words $(FUZZ_TARGETS)) )); [ $$per -ge 1 ] || per=1; \
	for t in $(FUZZ_TARGETS); do \
	  dict=fuzz/safetensors.dict; [ $$t = npy ] && dict=fuzz/npy.dict; \
	  mkdir -p build/asan/fuzz-corpus/$$t; \
	  echo "== fuzz_$$t for $$per s"; \
	  ./build/asan/fuzz/fuzz_$$t -max_total_time=$$per -rss_limit_mb=2048 -dict=$$dict \
	    build/asan/fuzz-corpus/$$t build/asan/fuzz-seeds/$$t || exit 1; \
	done

clean:
	rm -rf build
