/* Shared by every kcc kernel: status codes and the restrict spelling. Model-name free. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#define KCC_OK 0
#define KCC_EBADINPUT -1   /* an input value (id, length, extent) is out of its declared range */
#define KCC_EARENA -2      /* activation arena too small or misaligned */
#define KCC_EWEIGHTS -3    /* weight blob of the wrong size or misaligned */
#define KCC_EDIMS -4       /* a runtime dimension is outside the planned range */
#define KCC_ENULL -5       /* a required pointer is NULL */

#define KCC_RESTRICT restrict
