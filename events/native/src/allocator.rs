//! The module's memory comes from Python's raw allocator (`PyMem_RawMalloc`), so that
//! Python's accounting of memory sees it: `tracemalloc` traces it as it traces the Python
//! objects built beside it (here the names table and a message while it is read; in the fold's
//! kernels, `projections/native`, which compiles this same file, the table the fold indexes
//! by, whose estimate `projections.footprint` is tested against `tracemalloc`). The raw
//! allocator needs no GIL; it is `malloc` where no hook is installed. Blocks aligned past what
//! it guarantees (16 bytes on the platforms built for) come from the system allocator, told
//! apart by the same layout at `dealloc`.

use std::alloc::{GlobalAlloc, Layout, System};

use pyo3::ffi;

/// What `malloc` guarantees on 64-bit Linux and macOS.
const RAW_ALIGNMENT: usize = 16;

pub struct PythonRaw;

fn raw(layout: Layout) -> bool {
    layout.align() <= RAW_ALIGNMENT
}

// SAFETY: each block is freed or resized by the allocator that made it, told apart by its
// layout's alignment, which `GlobalAlloc` hands back unchanged; `PyMem_Raw*` return blocks
// aligned for any type up to `RAW_ALIGNMENT`, or NULL, which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for PythonRaw {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if raw(layout) {
            ffi::PyMem_RawMalloc(layout.size()).cast()
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if raw(layout) {
            ffi::PyMem_RawCalloc(1, layout.size()).cast()
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if raw(layout) {
            ffi::PyMem_RawFree(block.cast())
        } else {
            System.dealloc(block, layout)
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        if raw(layout) {
            ffi::PyMem_RawRealloc(block.cast(), size).cast()
        } else {
            System.realloc(block, layout, size)
        }
    }
}

/// The module's global allocator (each crate that compiles this file has it so).
#[global_allocator]
static ALLOCATOR: PythonRaw = PythonRaw;
