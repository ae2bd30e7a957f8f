# cmake -P script behind the `install` ctest test (see CMakeLists.txt here for the inputs).
# Steps, each failing the test with the command's output on error:
#   1. cmake --install <build dir> --prefix <work>/prefix (once)
#   2. for each consumer build type, Debug, Release and none (no CMAKE_BUILD_TYPE at all), in
#      its own build directory <work>/consumer-<type>:
#      a. configure tests/install/consumer against that prefix (and nothing else)
#      b. build it (verbose: the compile lines must show the consumer's -Wall -Wextra -Werror,
#         and -DNDEBUG exactly for Release), whatever type the library itself was built as
#      c. run it: exit code 0 and the line "lionet consumer OK: 42"
foreach(var LIONET_BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR CXX_COMPILER GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step name)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: step '${name}' failed (${rc}):\n${ARGN}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

# 1. Install.
run_step(install ${CMAKE_COMMAND} --install ${LIONET_BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/share/lionet/gdb/lionet.py)
  message(FATAL_ERROR "install test: the gdb extension ${prefix}/share/lionet/gdb/lionet.py was not installed")
endif()
if(NOT EXISTS ${prefix}/include/lionet/sched/scheduler.h)
  message(FATAL_ERROR "install test: ${prefix}/include/lionet/sched/scheduler.h was not installed")
endif()

# 2. The consumer, once per build type. CMAKE_FIND_USE_PACKAGE_REGISTRY=OFF and the lionet_DIR
# check in the consumer make sure it uses the installed package, not this build tree. In
# sanitizer builds the consumer gets the sanitizer flags too (CMakeLists.txt here says why).
set(flags "")
if(SANITIZE STREQUAL "address")
  set(flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
elseif(SANITIZE STREQUAL "thread")
  set(flags "-fsanitize=thread")
endif()
set(passed "")
foreach(type Debug Release none)
  set(consumer_build ${WORK_DIR}/consumer-${type})
  if(type STREQUAL "none")
    set(build_type "")  # explicitly empty: also overrides a CMAKE_BUILD_TYPE environment variable
  else()
    set(build_type ${type})
  endif()
  set(configure_args
    -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=${build_type}
    -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DEXPECTED_LIONET_PREFIX=${prefix})
  if(CXX_COMPILER_LAUNCHER)
    list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
  endif()
  if(flags)
    list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
  endif()
  run_step("configure (${type})" ${CMAKE_COMMAND} ${configure_args})

  run_step("build (${type})" ${CMAKE_COMMAND} --build ${consumer_build} --verbose)
  # The compile lines are the consumer's: its warnings as errors, and NDEBUG only in Release.
  if(NOT step_output MATCHES "-Wall -Wextra -Werror")
    message(FATAL_ERROR "install test: consumer (${type}) was not compiled with -Wall -Wextra -Werror:\n${step_output}")
  endif()
  if(type STREQUAL "Release" AND NOT step_output MATCHES "-DNDEBUG")
    message(FATAL_ERROR "install test: consumer (Release) was compiled without -DNDEBUG:\n${step_output}")
  elseif(NOT type STREQUAL "Release" AND step_output MATCHES "-DNDEBUG")
    message(FATAL_ERROR "install test: consumer (${type}) was compiled with -DNDEBUG:\n${step_output}")
  endif()

  run_step("run (${type})" ${consumer_build}/lionet_consumer)
  if(NOT step_output MATCHES "lionet consumer OK: 42")
    message(FATAL_ERROR "install test: consumer (${type}) ran but did not print the expected line:\n${step_output}")
  endif()
  string(STRIP "${step_output}" line)
  string(APPEND passed "\n  ${type}: ${line}")
endforeach()
message(STATUS "install test passed (library built as '${BUILD_TYPE}'):${passed}")
