/* kiln_hex.h — bytes as lowercase hex and back: blob names (XXH3-128),
 * SHA-256 digests, remote cache keys. One encoder for all of them. */
#ifndef KILN_HEX_H
#define KILN_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Write n bytes as 2n lowercase hex characters and a NUL into hex. */
void kiln_hex_encode(const uint8_t *b, size_t n, char *hex);

/* Parse exactly 2n hex characters followed by a NUL into b (untouched on
 * error); lower_only refuses A-F. 0 or KILN_EINVAL. */
int kiln_hex_decode(const char *hex, uint8_t *b, size_t n, int lower_only);

#endif
