/* QUOTA_API: what the shared library exports.
 *
 * The library is compiled with hidden visibility (-fvisibility=hidden), so a shared libquota
 * exports exactly the declarations marked QUOTA_API: the public classes and functions of
 * include/quota/ and the C API of quota.h. Internals (src/) stay private to the library.
 * In a static library the mark changes nothing.
 *
 * This header is C as well as C++ (quota.h includes it). Only ELF platforms with GCC or
 * Clang are built and tested; the Windows branch is the usual dllexport/dllimport pair, keyed
 * on QUOTA_SHARED (set for users of a shared build) and QUOTA_BUILDING (set while compiling
 * the library). */
#ifndef QUOTA_EXPORT_H_
#define QUOTA_EXPORT_H_

#if defined(_WIN32)
#if defined(QUOTA_BUILDING)
#define QUOTA_API __declspec(dllexport)
#elif defined(QUOTA_SHARED)
#define QUOTA_API __declspec(dllimport)
#else
#define QUOTA_API
#endif
#elif defined(__GNUC__)
#define QUOTA_API __attribute__((visibility("default")))
#else
#define QUOTA_API
#endif

#endif /* QUOTA_EXPORT_H_ */
