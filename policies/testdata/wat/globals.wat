;; globals.wat: a hostile completion policy that counts its calls in a
;; mutable global the module does not export, and puts the count in its
;; reason ("calls=N"). If the global survived between evaluations, the
;; second evaluation would say calls=2. The memory write of the digit is
;; undone by the memory restore; only the global could carry state.
;;
;; Assemble: wat2wasm globals.wat -o globals.wasm
(module
  (memory (export "memory") 2)
  (global $calls (mut i32) (i32.const 0))
  ;; status 0, decision 0 (continue), revert 0, reason of 7 bytes
  (data (i32.const 64) "\00\00\00\07\00\00\00calls=0")
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 2))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param $n i32) (result i32) (i32.const 4096))
  (func (export "hivelet_completion") (param $p i32) (param $n i32) (result i64)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.store8 (i32.const 77) (i32.add (i32.const 48) (global.get $calls)))
    (i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 14))))
