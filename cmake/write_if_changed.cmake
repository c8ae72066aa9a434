# kiln_write_if_changed(FILE CONTENT): writes CONTENT to FILE only when it differs, so a
# reconfigure does not touch generated files (and rebuild what includes them) needlessly.
function(kiln_write_if_changed file content)
  set(old "")
  if(EXISTS ${file})
    file(READ ${file} old)
  endif()
  if(NOT content STREQUAL old)
    file(WRITE ${file} "${content}")
  endif()
endfunction()
