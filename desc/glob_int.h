// glob_int.h — the compiled form of a pattern, shared by glob_compile.c,
// which builds it, and glob_match.c, which walks it. Private to desc/.
//
// A kiln_glob holds up to KILN_GLOB_MAX_ALTS alternatives (the braces
// expanded); each is a run of segments, each segment a run of ops: a
// literal byte (< 256), OP_ANY ('?'), OP_STAR ('*') or OP_CLASS + k
// (the k-th 256-bit class in cls). A "**" segment is SEG_DSTAR.
#ifndef KILN_GLOB_INT_H
#define KILN_GLOB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "glob.h"

enum { OP_ANY = 256, OP_STAR = 257, OP_CLASS = 258 };
enum seg_kind { SEG_LIT, SEG_WILD, SEG_DSTAR };

struct seg {
	uint32_t op;    // first op in kiln_glob.ops
	uint16_t nop;
	uint16_t ntail; // SEG_WILD: how many literal ops end it after its last
	                // STAR ("*.png": 4), which must end the path segment
	uint8_t kind;   // enum seg_kind
};

struct alt {
	uint32_t seg, nseg; // in kiln_glob.segs
};

struct kiln_glob {
	char *prefix;          // see glob_prefix
	size_t nprefix, nskip; // its length, and how many segments it holds
	int literal;
	char *text;            // when literal: the one path it matches
	size_t nalt;
	struct alt alt[KILN_GLOB_MAX_ALTS];
	struct seg *segs;
	size_t nseg, capseg;
	uint16_t *ops;
	size_t nops, capops;
	uint8_t (*cls)[32];
	size_t ncls, capcls;
};

#endif
