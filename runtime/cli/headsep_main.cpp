// The headsep executable: the app of main.cpp with the executable's plugin folder. The Python
// package runs the same app through its extension (python/src/cli.cpp).
#include "cli/options.hpp"

int main(int argc, char** argv) { return headsep::cli::run_cli(argc, argv); }
