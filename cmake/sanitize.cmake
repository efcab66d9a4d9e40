# Sanitizer builds (docs/design.md, "Sanitizers").
#
# FTR_SANITIZE: every C target is compiled and linked with ASan + UBSan, except the targets
# whose FTR_NO_SANITIZE property is true. libftrace.so is one of them: it is preloaded into
# programs that carry no sanitizer runtime, and its hot path may use general registers only.
# The static libraries linked into it (ftr_format, ftr_patcher) are therefore built twice: as
# they are, sanitized, for the tools and tests, and as unsanitized copies <name>_nosan, which
# ftr_sanitize_preload() substitutes in the preload's link line.
#
# FTR_SANITIZE_PRELOAD: libftrace.so's own C files are built with UBSan, aborting at the first
# report; hooks.c (the hot path) opts out with -fno-sanitize=all (preload/CMakeLists.txt). The
# runtime must work without being loaded first: GCC (which has no minimal runtime) links
# libubsan.so, clang links its minimal runtime statically, its symbols kept local.

set(FTR_SANITIZE_FLAGS -fsanitize=address -fsanitize=undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)

if(FTR_SANITIZE)
  set(_ftr_san "$<NOT:$<BOOL:$<TARGET_PROPERTY:FTR_NO_SANITIZE>>>")
  add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:C>,${_ftr_san}>:${FTR_SANITIZE_FLAGS}>")
  add_link_options("$<${_ftr_san}:${FTR_SANITIZE_FLAGS}>")
endif()

# An unsanitized copy, <base>_nosan, of the static library <base> of this project.
function(_ftr_nosan_copy base)
  if(TARGET ${base}_nosan)
    return()
  endif()
  get_target_property(dir ${base} SOURCE_DIR)
  get_target_property(srcs ${base} SOURCES)
  set(abs)
  foreach(s IN LISTS srcs)
    get_filename_component(a "${s}" ABSOLUTE BASE_DIR "${dir}")
    list(APPEND abs "${a}")
  endforeach()
  add_library(${base}_nosan STATIC ${abs})
  foreach(p INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES COMPILE_DEFINITIONS
            INTERFACE_COMPILE_DEFINITIONS COMPILE_OPTIONS INTERFACE_COMPILE_OPTIONS
            LINK_LIBRARIES INTERFACE_LINK_LIBRARIES C_VISIBILITY_PRESET)
    get_target_property(v ${base} ${p})
    if(v)
      set_property(TARGET ${base}_nosan PROPERTY ${p} "${v}")
    endif()
  endforeach()
  set_property(TARGET ${base}_nosan PROPERTY FTR_NO_SANITIZE ON)
  _ftr_nosan_links(${base}_nosan)
endfunction()

# In target's link libraries, every static library of this project becomes its _nosan copy.
function(_ftr_nosan_links target)
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libs ${target} ${prop})
    if(NOT libs)
      continue()
    endif()
    set(out)
    foreach(lib IN LISTS libs)
      # a static library's private dependencies appear as $<LINK_ONLY:name>
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" name "${lib}")
      if(TARGET "${name}")
        get_target_property(type ${name} TYPE)
        get_target_property(imported ${name} IMPORTED)
        if(type STREQUAL "STATIC_LIBRARY" AND NOT imported)
          _ftr_nosan_copy(${name})
          string(REPLACE "${name}" "${name}_nosan" lib "${lib}")
        endif()
      endif()
      list(APPEND out "${lib}")
    endforeach()
    set_property(TARGET ${target} PROPERTY ${prop} "${out}")
  endforeach()
endfunction()

# Called once the preload's target is defined.
function(ftr_sanitize_preload target)
  if(FTR_SANITIZE)
    set_property(TARGET ${target} PROPERTY FTR_NO_SANITIZE ON)
    _ftr_nosan_links(${target})
  endif()
  if(FTR_SANITIZE_PRELOAD)
    set(ub -fsanitize=undefined -fno-sanitize-recover=undefined)
    if(CMAKE_C_COMPILER_ID MATCHES "Clang")
      list(APPEND ub -fsanitize-minimal-runtime)
      execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libclang_rt.ubsan_minimal-x86_64.a
                      OUTPUT_VARIABLE rt OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT IS_ABSOLUTE "${rt}" OR NOT EXISTS "${rt}")
        message(FATAL_ERROR "FTR_SANITIZE_PRELOAD: ${CMAKE_C_COMPILER} has no UBSan minimal runtime")
      endif()
      target_link_libraries(${target} PRIVATE "${rt}")
      target_link_options(${target} PRIVATE "LINKER:--exclude-libs,libclang_rt.ubsan_minimal-x86_64.a")
    else()
      target_link_options(${target} PRIVATE ${ub})
    endif()
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C>:${ub}>")
  endif()
endfunction()
