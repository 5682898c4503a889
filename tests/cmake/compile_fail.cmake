# A compile-fail check: compiles FILE once per case (-DCASE=0..N) with the project's
# compiler and include paths. Case 0 must compile, so that a failure of the others is about
# what they test, not the setup; case i >= 1 must fail with an error matching the i-th
# regex of EXPECTED (comma-separated: a CMake list would not survive add_test's quoting).
# WHY says what each failing case does wrong ("misspells a name").
#   cmake -DCXX=... -DSOURCE_DIR=... -DGENERATED_DIR=... -DFILE=... -DEXPECTED=a,b \
#         -DWHY=... -P compile_fail.cmake
string(REPLACE "," ";" EXPECTED "${EXPECTED}")
list(LENGTH EXPECTED cases)
foreach(case RANGE 0 ${cases})
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only -DCASE=${case} -I${SOURCE_DIR} -I${GENERATED_DIR} ${FILE}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(case EQUAL 0)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "case 0 (the one that must compile) does not compile:\n${err}")
    endif()
    continue()
  endif()
  math(EXPR index "${case} - 1")
  list(GET EXPECTED ${index} expected)
  if(rc EQUAL 0)
    message(FATAL_ERROR "case ${case} compiled, but it ${WHY}")
  elseif(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "case ${case} failed without saying '${expected}':\n${err}")
  else()
    message(STATUS "case ${case}: refused as expected")
  endif()
endforeach()
