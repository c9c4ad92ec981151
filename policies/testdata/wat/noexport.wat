;; noexport.wat: declares the canary kind but lacks hivelet_canary (missing export fault).
(module
  (memory (export "memory") 2)
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 1))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param i32) (result i32) (i32.const 1024))
)
