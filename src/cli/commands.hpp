#pragma once
// Every `mixq` subcommand adds itself to the root app through one function
// here; main.cpp calls them all. Each lives in its own cmd_<name>.cpp.
#include <CLI/CLI.hpp>

namespace mixq::cli {

void add_inspect(CLI::App& root);
void add_plan(CLI::App& root);
void add_dequantize(CLI::App& root);
void add_linear(CLI::App& root);
void add_quantize(CLI::App& root);
void add_verify(CLI::App& root);
void add_bench(CLI::App& root);
void add_shard(CLI::App& root);

}  // namespace mixq::cli
