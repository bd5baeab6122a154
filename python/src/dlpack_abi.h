/* dlpack_abi.h - the DLPack 0.x exchange structures (the unversioned DLManagedTensor that
 * NumPy 1.24 and PyTorch produce and consume), as the DLPack ABI lays them out. tgraph.h
 * names only `struct DLManagedTensor`; the extension fills and reads its fields through
 * this copy of the standard layout (same field order, widths and tag names).
 */
#ifndef TGPY_DLPACK_ABI_H
#define TGPY_DLPACK_ABI_H
#include <stdint.h>

enum { DL_CPU = 1 };                                         /* DLDeviceType: host memory */
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BOOL = 6 }; /* DLDataTypeCode */

typedef struct DLDevice {
    int32_t device_type;
    int32_t device_id;
} DLDevice;

typedef struct DLDataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct DLTensor {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: contiguous */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif
