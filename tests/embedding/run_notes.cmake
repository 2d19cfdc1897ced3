# Runs examples/notes on a fresh database file and compares its output with EXPECTED.
#   cmake -DPROGRAM=... -DDATABASE=... -DEXPECTED=... -P run_notes.cmake
foreach(suffix "" "-wal" "-shm")
  file(REMOVE ${DATABASE}${suffix})
endforeach()
execute_process(COMMAND ${PROGRAM} ${DATABASE} RESULT_VARIABLE status OUTPUT_VARIABLE output
                ERROR_VARIABLE errors)
file(READ ${EXPECTED} expected)
if(NOT status EQUAL 0 OR NOT output STREQUAL expected)
  message(FATAL_ERROR "notes exited with ${status}\n--- output:\n${output}${errors}"
                      "--- expected:\n${expected}")
endif()
