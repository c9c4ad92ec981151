;; table.wat: a hostile completion policy that keeps state in its table.
;; Each call answers through the function in slot 0, then copies slot 1
;; over slot 0 (table.copy): if the table survived between evaluations, the
;; second evaluation would answer "calls=2". No global, no memory state.
;;
;; Assemble: wat2wasm table.wat -o table.wasm
(module
  (memory (export "memory") 2)
  (type $answer (func (result i64)))
  (table 2 funcref)
  (elem (i32.const 0) $first $second)
  (data (i32.const 64) "\00\00\00\07\00\00\00calls=1")
  (data (i32.const 128) "\00\00\00\07\00\00\00calls=2")
  (func $first (result i64) (i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 14)))
  (func $second (result i64) (i64.or (i64.shl (i64.const 128) (i64.const 32)) (i64.const 14)))
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 2))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param $n i32) (result i32) (i32.const 4096))
  (func (export "hivelet_completion") (param $p i32) (param $n i32) (result i64)
    (local $r i64)
    (local.set $r (call_indirect (type $answer) (i32.const 0)))
    (table.copy (i32.const 0) (i32.const 1) (i32.const 1))
    (local.get $r)))
