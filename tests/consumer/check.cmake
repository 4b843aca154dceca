# CTest driver (cmake -P): builds tests/consumer against samebits and runs it.
#   MODE=package:      installs the samebits build tree BUILD_DIR into WORK/prefix, then
#                      find_package(samebits) from there;
#   MODE=subdirectory: add_subdirectory(SOURCE_DIR) (builds the library again, in WORK).
# Also takes GENERATOR, CXX (the compiler) and CUDA (SAMEBITS_CUDA of the subproject).
file(REMOVE_RECURSE ${WORK})
set(args -S ${SOURCE_DIR}/tests/consumer -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release)
if(MODE STREQUAL "package")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: cmake --install ${BUILD_DIR} failed (${rc})")
  endif()
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  list(APPEND args -DSAMEBITS_CONSUMER_MODE=subdirectory -DSAMEBITS_SOURCE_DIR=${SOURCE_DIR}
       -DSAMEBITS_CUDA=${CUDA})
endif()
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (${rc})")
  endif()
endfunction()
run("configuring" ${CMAKE_COMMAND} ${args})
run("building" ${CMAKE_COMMAND} --build ${WORK}/build --target consumer)
run("the program" ${WORK}/build/consumer)
file(REMOVE_RECURSE ${WORK})
