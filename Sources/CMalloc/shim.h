// glibc's malloc tuning (mallopt, M_TRIM_THRESHOLD, M_MMAP_THRESHOLD): <malloc.h> is not
// in Swift's Glibc module. No logic here.
#include <malloc.h>
