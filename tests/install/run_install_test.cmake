# cmake -P script behind the `install` ctest test (see CMakeLists.txt here for the inputs).
# Steps, each failing the test with the command's output on error:
#   1. cmake --install <build dir> --prefix <work>/prefix
#   2. configure tests/install/consumer against that prefix (and nothing else)
#   3. build it
#   4. run it: exit code 0 and the line "lionet consumer OK: 42"
foreach(var LIONET_BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR CXX_COMPILER GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
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
if(NOT EXISTS ${prefix}/include/lionet/sched/scheduler.h)
  message(FATAL_ERROR "install test: ${prefix}/include/lionet/sched/scheduler.h was not installed")
endif()

# 2. Configure the consumer. CMAKE_FIND_USE_PACKAGE_REGISTRY=OFF and the lionet_DIR check in
# the consumer make sure it uses the installed package, not this build tree.
set(flags "")
if(SANITIZE STREQUAL "address")
  set(flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
elseif(SANITIZE STREQUAL "thread")
  set(flags "-fsanitize=thread")
endif()
set(configure_args
  -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DEXPECTED_LIONET_PREFIX=${prefix})
if(BUILD_TYPE)
  list(APPEND configure_args -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()
if(flags)
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
endif()
run_step(configure ${CMAKE_COMMAND} ${configure_args})

# 3. Build.
run_step(build ${CMAKE_COMMAND} --build ${consumer_build})

# 4. Run.
run_step(run ${consumer_build}/lionet_consumer)
if(NOT step_output MATCHES "lionet consumer OK: 42")
  message(FATAL_ERROR "install test: consumer ran but did not print the expected line:\n${step_output}")
endif()
message(STATUS "install test passed: ${step_output}")
