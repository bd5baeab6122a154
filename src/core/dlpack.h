/* dlpack.h - the DLPack exchange structures, laid out as the DLPack ABI (version 0.x, the
 * unversioned DLManagedTensor that NumPy 1.24 and PyTorch 1.13 produce and consume) fixes
 * them. tgraph.h names only `struct DLManagedTensor`, so that a program may include the
 * standard dlpack.h itself; the library and its tests read the fields through this header.
 *
 * Invariant: the layout (field order, widths) is DLPack's; the tag names are DLPack's, so
 * a pointer from a program built against dlpack.h is the same type here.
 */
#ifndef TG_CORE_DLPACK_H
#define TG_CORE_DLPACK_H
#include <stdint.h>

/* Device types (DLDeviceType): tgraph exchanges host memory only. */
enum { TG_DL_CPU = 1, TG_DL_CUDA = 2, TG_DL_CUDA_HOST = 3 };
/* Type codes (DLDataTypeCode). */
enum {
    TG_DL_INT = 0,
    TG_DL_UINT = 1,
    TG_DL_FLOAT = 2,
    TG_DL_BFLOAT = 4,
    TG_DL_COMPLEX = 5,
    TG_DL_BOOL = 6
};

typedef struct DLDevice {
    int32_t device_type; /* TG_DL_* */
    int32_t device_id;
} DLDevice;

typedef struct DLDataType {
    uint8_t code;   /* TG_DL_INT ... */
    uint8_t bits;   /* of one lane */
    uint16_t lanes; /* 1 for tensors tgraph takes */
} DLDataType;

typedef struct DLTensor {
    void *data; /* base address; element [0,...,0] is at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;   /* ndim extents */
    int64_t *strides; /* ndim strides in elements; NULL: contiguous, C order */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;                             /* the producer's */
    void (*deleter)(struct DLManagedTensor *self); /* called once by the consumer; may be NULL */
} DLManagedTensor;

#endif
