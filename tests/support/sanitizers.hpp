#pragma once
// MIXQ_UNDER_ASAN is 1 in an AddressSanitizer build. g++ defines
// __SANITIZE_ADDRESS__; clang 14 (the `asan` preset's compiler) only answers
// __has_feature(address_sanitizer).

#if defined(__SANITIZE_ADDRESS__)
#define MIXQ_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIXQ_UNDER_ASAN 1
#endif
#endif
#ifndef MIXQ_UNDER_ASAN
#define MIXQ_UNDER_ASAN 0
#endif
