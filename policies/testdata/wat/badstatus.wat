;; badstatus.wat: answers a status byte the ABI does not define (invalid output fault).
(module
  (memory (export "memory") 2)
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 1))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param i32) (result i32) (i32.const 1024))
  (data (i32.const 16) "\09")
  (func (export "hivelet_canary") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 1))))
