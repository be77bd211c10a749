#include <sqlite3.h>
#if defined(__linux__)
// glibc's malloc_trim, which Swift's Glibc module does not export: the benchmark hands
// back what a workload's setup freed before it measures the timed part's peak memory.
#include <malloc.h>
#endif
