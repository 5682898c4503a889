// tandem: the command-line front door (tools/tandem/cli_main.cc). The shipped binary
// installs no test hooks (tools/tandem/train_hooks.h).

#include "tools/tandem/commands.h"

int main(int argc, char** argv) { return tandem::tools::runCommandLine(argc, argv); }
