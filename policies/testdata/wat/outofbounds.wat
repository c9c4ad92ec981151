;; outofbounds.wat: answers a pointer outside its memory (invalid output fault).
(module
  (memory (export "memory") 2)
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 1))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "hivelet_canary") (param i32 i32) (result i64)
    (i64.const 0x7fff000000000064)))
