/*
 * ProcessPrng for Wine 8.0, which has no bcryptprimitives.dll (Windows 8 and
 * later, and Wine 9, do). Rust's standard library imports it to seed its
 * hash maps, so no Rust program starts without it. Only for the Wine prefix
 * of tests/emulated; nothing here is shipped.
 */
#include <windows.h>
#include <ntsecapi.h>

/* Fills the buffer from the system generator; like Windows' own, it never fails. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000 ? 0x10000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk))
            ExitProcess(ERROR_INTERNAL_ERROR);
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
