/* hex.c — bytes as lowercase hex and back (kiln_hex.h). */
#include <string.h>

#include "kiln_error.h"
#include "kiln_hex.h"

void
kiln_hex_encode(const uint8_t *b, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[b[i] >> 4];
		hex[2 * i + 1] = digits[b[i] & 15];
	}
	hex[2 * n] = '\0';
}

static int
digit_value(char c, int lower_only)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (!lower_only && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
kiln_hex_decode(const char *hex, uint8_t *b, size_t n, int lower_only)
{
	uint8_t tmp[64];

	if (hex == NULL || n > sizeof tmp)
		return KILN_EINVAL;
	for (size_t i = 0; i < n; i++) {
		int hi = digit_value(hex[2 * i], lower_only);
		int lo = hi < 0 ? -1 : digit_value(hex[2 * i + 1], lower_only);
		if (hi < 0 || lo < 0)
			return KILN_EINVAL;
		tmp[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[2 * n] != '\0')
		return KILN_EINVAL;
	memcpy(b, tmp, n);
	return 0;
}
