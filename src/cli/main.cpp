// The `mixq` command: usage errors exit 2, rejected input exits 1, and every
// failure is one line on stderr starting "mixq: error: " (docs/CLI.md);
// mixq::Error messages arrive escaped, anything else is escaped here.
#include <cstdio>
#include <exception>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "mixq/error.hpp"
#include "mixq/escape.hpp"
#include "mixq/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"mixq: mixed-precision quantized diffusion checkpoints"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mixq " MIXQ_VERSION);
  mixq::cli::add_inspect(app);
  mixq::cli::add_plan(app);
  mixq::cli::add_dequantize(app);
  mixq::cli::add_linear(app);
  mixq::cli::add_quantize(app);
  mixq::cli::add_verify(app);
  mixq::cli::add_bench(app);
  mixq::cli::add_shard(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with exit code 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "mixq: error: {}\n", mixq::escape_text(e.what()));
    return 2;
  } catch (const mixq::UsageError& e) {
    fmt::print(stderr, "mixq: error: {}\n", e.what());
    return 2;
  } catch (const mixq::Error& e) {
    fmt::print(stderr, "mixq: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "mixq: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mixq: error: internal: {}\n", mixq::escape_text(e.what()));
    return 1;
  }
}
