/* glibc libm probe for scripts/qemu-cpus.sh: 1e6 pseudo-random arguments through exp, log, pow, sin, cos and their
 * float versions, each result's bits written to the file named by argv[1] (8 bytes a result, float results
 * zero-extended). glibc picks FMA variants of the double functions by CPUID (ifunc), so comparing the files of two
 * CPU models shows which results depend on the CPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t state = 88172645463325252ull;
static double uniform(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (double)(state >> 11) * 0x1.0p-53;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: libm-probe OUT\n"); return 2; }
  FILE *out = fopen(argv[1], "wb");
  if (!out) { perror(argv[1]); return 1; }
  for (int f = 0; f < 10; f++) {
    for (int i = 0; i < 1000000; i++) {
      double x = (uniform() - 0.5) * 40.0, y = uniform() * 30.0 + 1e-3;
      uint64_t b = 0;
      double d = 0;
      float s = 0;
      switch (f) {
        case 0: d = exp(x); break;
        case 1: d = log(y); break;
        case 2: d = pow(y, x / 4); break;
        case 3: d = sin(x * 100); break;
        case 4: d = cos(x * 100); break;
        case 5: s = expf((float)x); break;
        case 6: s = logf((float)y); break;
        case 7: s = powf((float)y, (float)(x / 4)); break;
        case 8: s = sinf((float)(x * 100)); break;
        default: s = cosf((float)(x * 100)); break;
      }
      if (f < 5) memcpy(&b, &d, 8); else memcpy(&b, &s, 4);
      fwrite(&b, 8, 1, out);
    }
  }
  return fclose(out) != 0;
}
