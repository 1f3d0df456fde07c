# Every dependency comes from a Debian package (scripts/setup.sh installs them)
# or the CUDA/ROCm toolkit. Nothing is vendored or downloaded at build time.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
# PCRE2 runs the tokenizer's pre-tokenization regexes (translated from the
# Oniguruma dialect Hugging Face `tokenizers` uses); utf8proc normalizes.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
find_package(Threads REQUIRED)
if(HIPFORMERS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
