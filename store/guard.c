/* guard.c — surviving a file cut short under one of the store's maps.
 *
 * The store reads three kinds of file through mmap: LMDB's data file
 * (db.c), large blobs copied out (blob.c: kiln_store_copy_out) and files
 * put by path (blob.c: put_mapped). A read of a mapped page past the
 * file's end is a SIGBUS, which kills the process: someone truncating
 * .kiln/store/db/data.mdb under a running daemon, or an editor rewriting
 * a source as it is put. db.c checks the data file's size before every
 * transaction (db_sound), but a cut between that check and a read cannot
 * be checked away; this is the net under that race.
 *
 * A mapping that may be cut registers its range here (guard_add). The
 * SIGBUS handler, when the faulting address lies in a registered range,
 * maps a private anonymous page over the faulting page, marks the range
 * faulted and returns: the faulting load runs again and reads the page
 * put there. The owner checks guard_faulted when done with the map and
 * throws away whatever it computed (db.c: the transaction is aborted and
 * the database refused from then on; blob.c: the put or copy fails). A
 * SIGBUS anywhere else goes to the action that was there before
 * (normally the default: the process dies as it would have).
 *
 * What is put over a page of LMDB's map is not zeros: LMDB 0.9 asserts
 * (and so aborts) on a page of no kind reached as a sibling while a cursor
 * walks (mdb_cursor_sibling: IS_BRANCH; mdb_cursor_next: IS_LEAF). The
 * page put there (lmdb_filler) is both a branch and a leaf page (flags
 * P_BRANCH|P_LEAF) of two nodes with empty keys: read as a branch, both
 * children are a page number past any map (0x8 << 32: mdb_page_get
 * answers MDB_PAGE_NOTFOUND); read as a leaf, both nodes hold an empty
 * value with no flag LMDB acts on (0x08 is none of F_BIGDATA, F_SUBDATA,
 * F_DUPDATA). Every assert on a read path (mdb.c 0.9.24: page_search_root,
 * cursor_sibling, cursor_next/prev) holds for it, and every path through
 * it ends in an error or an empty record, which the caller discards
 * anyway. Layout as in dbcheck.c: pgno @0, flags @10, lower @12, upper
 * @14, node offsets from @16; a node: lo, hi, flags, ksize (u16 each).
 *
 * State: the registry is global (a signal handler cannot be handed
 * anything): a fixed table of slots, each claimed and given back with
 * atomics, read by the handler with atomic loads only. The handler calls
 * only mmap, mremap, mprotect, munmap and sigaction (plain system calls)
 * and saves errno. kiln_store_guard_install is the process's decision
 * (a library does not take a signal over unasked): kilnd makes it, the
 * kiln command does not. Without it guard_add returns -1 and nothing
 * changes. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_int.h"

#define GUARD_SLOTS 256
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define FILLER_NODE_FLAGS 0x08u

struct guard_slot {
	int used;          /* claimed (guard_add .. guard_remove) */
	uintptr_t lo, hi;  /* the range; hi 0 while being set */
	unsigned psize;    /* LMDB's page size; 0: a plain file (zeros) */
	int faulted;       /* a page of it was replaced */
};

static struct guard_slot slots[GUARD_SLOTS];
static int installed;
static size_t os_page;
static struct sigaction previous;

static void
put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, sizeof v);
}

/* Make the page at p (psize bytes, zeroed) the LMDB filler for pgno. */
static void
lmdb_filler(uint8_t *p, uint64_t pgno, unsigned psize)
{
	uint16_t node = (uint16_t)(psize - 8); /* one node of 8 bytes, at the end */

	memcpy(p, &pgno, sizeof pgno);
	put16(p + 10, P_BRANCH | P_LEAF);
	put16(p + 12, 16 + 2 * 2);
	put16(p + 14, node);
	put16(p + 16, node);
	put16(p + 18, node);
	/* lo 0, hi 0: child (8 << 32) as a branch, an empty value as a leaf */
	put16(p + node + 4, FILLER_NODE_FLAGS);
}

/* Replace the OS page holding addr in slot g's range with a prepared
 * private page, in one step (mremap), so that another thread reading it
 * meanwhile sees the file's page or the whole filler. Returns 0 or -1. */
static int
guard_fill(struct guard_slot *g, uintptr_t addr)
{
	uintptr_t page = addr & ~(uintptr_t)(os_page - 1);
	unsigned psize = __atomic_load_n(&g->psize, __ATOMIC_ACQUIRE);
	uintptr_t lo = __atomic_load_n(&g->lo, __ATOMIC_ACQUIRE);
	void *tmp = mmap(NULL, os_page, PROT_READ | PROT_WRITE,
	                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (tmp == MAP_FAILED)
		return -1;
	/* LMDB pages the size of an OS page (4 KiB: every Linux LMDB file
	 * made here); another size gets zeros (LMDB errors on most paths) */
	if (psize != 0 && psize == os_page && (page - lo) % psize == 0)
		lmdb_filler(tmp, (page - lo) / psize, psize);
	if (mprotect(tmp, os_page, PROT_READ) != 0 ||
	    mremap(tmp, os_page, os_page, MREMAP_MAYMOVE | MREMAP_FIXED,
	           (void *)page) == MAP_FAILED) {
		munmap(tmp, os_page);
		return -1;
	}
	__atomic_store_n(&g->faulted, 1, __ATOMIC_RELEASE);
	return 0;
}

static void
guard_handler(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;
	int saved = errno;

	(void)ctx;
	if (si->si_code == BUS_ADRERR)
		for (size_t i = 0; i < GUARD_SLOTS; i++) {
			struct guard_slot *g = &slots[i];
			uintptr_t hi = __atomic_load_n(&g->hi, __ATOMIC_ACQUIRE);
			if (hi != 0 && addr >= __atomic_load_n(&g->lo, __ATOMIC_ACQUIRE) &&
			    addr < hi && guard_fill(g, addr) == 0) {
				errno = saved;
				return;
			}
		}
	/* not ours: the action there was before; the load faults again */
	sigaction(sig, &previous, NULL);
	errno = saved;
}

int
kiln_store_guard_install(void)
{
	struct sigaction sa, cur;

	/* ours already (someone may have set another since: a test
	 * harness's catcher; then ours goes in front of it again) */
	if (sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == guard_handler)
		return 0;
	os_page = (size_t)sysconf(_SC_PAGESIZE);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = guard_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &previous) != 0)
		return kiln_err_from_errno(errno);
	__atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
	return 0;
}

int
guard_add(const void *base, size_t len, unsigned psize)
{
	if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE) || base == NULL || len == 0)
		return -1;
	for (int i = 0; i < GUARD_SLOTS; i++) {
		int free_ = 0;
		if (__atomic_load_n(&slots[i].used, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&slots[i].used, &free_, 1, 0,
		                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&slots[i].faulted, 0, __ATOMIC_RELAXED);
		guard_move(i, base, len, psize);
		return i;
	}
	return -1;
}

void
guard_move(int i, const void *base, size_t len, unsigned psize)
{
	if (i < 0)
		return;
	__atomic_store_n(&slots[i].hi, 0, __ATOMIC_RELEASE);
	if (base == NULL || len == 0)
		return;
	__atomic_store_n(&slots[i].psize, psize, __ATOMIC_RELEASE);
	__atomic_store_n(&slots[i].lo, (uintptr_t)base, __ATOMIC_RELEASE);
	__atomic_store_n(&slots[i].hi, (uintptr_t)base + len, __ATOMIC_RELEASE);
}

int
guard_faulted(int i)
{
	return i >= 0 && __atomic_load_n(&slots[i].faulted, __ATOMIC_ACQUIRE);
}

void
guard_remove(int i)
{
	if (i < 0)
		return;
	__atomic_store_n(&slots[i].hi, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&slots[i].used, 0, __ATOMIC_RELEASE);
}
