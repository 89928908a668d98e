#pragma once
// Included first by a kernel file whose arithmetic must match a reference
// compiled with baseline flags, which has no FMA: with FMA enabled, g++
// contracts a*b+c in C++ (-ffp-contract=fast) and clang within an expression
// (=on). Both stop here, so every product stays rounded as in the reference.
#if defined(__clang__)
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif
