;; abi9.wat: declares ABI version 9, newer than any this host implements
;; (ABI version fault, refused at load).
(module
  (memory (export "memory") 2)
  (func (export "hivelet_abi_version") (result i32) (i32.const 9))
  (func (export "hivelet_kinds") (result i32) (i32.const 1))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "hivelet_canary") (param i32 i32) (result i64) (i64.const 0)))
