/* idx.h - a reader for the IDX format of MNIST and Fashion-MNIST, plain or gzipped.
 *
 * An IDX file is a big-endian header (two zero bytes, a type code, the number of
 * dimensions, then one 32-bit extent per dimension) followed by the elements in C order.
 * Type codes: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64; the result is a
 * tgraph tensor of that dtype and shape, in native byte order.
 *
 * idx_parse is pure: a buffer in (raw IDX, or gzip detected by its magic bytes), a tensor
 * or a message out, no I/O and no global state. Every size is checked before anything is
 * allocated: the extents' product must fit, and must match the bytes the buffer holds (a
 * gzip stream cannot hold more than 1032 times its compressed size, nor more than its
 * trailer says). Trailing bytes after the elements are an error (a lying header).
 */
#ifndef TG_EXAMPLES_IDX_H
#define TG_EXAMPLES_IDX_H

#include <tgraph.h>

#include <stddef.h>

#define IDX_MAX_DIMS 8 /* most dimensions accepted (TG_MAX_DIMS) */

/* Parses len bytes at buf into a new tensor (allocated through ctx; NULL: the default
 * context). On failure returns TG_EFORMAT (malformed or truncated data), TG_ELIMIT
 * (a size past what the buffer can hold or memory can address) or TG_ENOMEM, leaves
 * *out NULL and writes a one-line message to err (errsz bytes, may be 0). */
tg_status idx_parse(tg_ctx *ctx, const void *buf, size_t len, tg_tensor **out, char *err,
                    size_t errsz);

/* Reads the file at path and parses it as idx_parse does; messages start with the path.
 * TG_EIO when the file cannot be opened or read. */
tg_status idx_load(tg_ctx *ctx, const char *path, tg_tensor **out, char *err, size_t errsz);

#endif
