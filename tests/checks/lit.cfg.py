# lit's configuration of the check-line tests (tests/checks/**/*.tir), as MLIR's: each file
# holds a small module and `// RUN:` lines that run `tandem opt` over it, piped into LLVM's
# FileCheck, which matches the `// CHECK:` lines. lit, FileCheck and `not` come with LLVM's
# tools (Debian llvm-15-tools); ctest runs lit once per file with the folders of the tandem
# CLI under test and of LLVM's tools (tests/CMakeLists.txt).
import os

import lit.formats

config.name = "tandem checks"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir"]
config.test_source_root = os.path.dirname(__file__)
# lit writes its Output/ folders and a file of test times under the exec root: a folder
# of the build per check file (ctest runs them in parallel), never the source tree.
config.test_exec_root = lit_config.params.get("exec_root")
if not config.test_exec_root:
    lit_config.fatal("give --param exec_root=DIR (where lit writes its outputs), as ctest does")

tandem_dir = lit_config.params.get("tandem_dir")
llvm_bin = lit_config.params.get("llvm_bin")
if not tandem_dir or not llvm_bin:
    lit_config.fatal("give --param tandem_dir=DIR (the tandem CLI's folder) and "
                     "--param llvm_bin=DIR (FileCheck's), as ctest does")
# `tandem` by name, first on PATH (MLIR's tests name `mlir-opt` so too): a %-substitution
# named %tandem would be cut short by lit's own %t.
config.environment["PATH"] = os.pathsep.join([tandem_dir, llvm_bin, os.environ.get("PATH", "")])
