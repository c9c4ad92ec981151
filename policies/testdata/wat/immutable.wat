;; immutable.wat: the control for globals.wat. The same answer, but the
;; module's only global is immutable (the answer's address), so it has no
;; state beyond memory and keeps the pooled, restored instances.
;;
;; Assemble: wat2wasm immutable.wat -o immutable.wasm
(module
  (memory (export "memory") 2)
  (global $answer i32 (i32.const 64))
  (data (i32.const 64) "\00\00\00\07\00\00\00calls=0")
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 2))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param $n i32) (result i32) (i32.const 4096))
  (func (export "hivelet_completion") (param $p i32) (param $n i32) (result i64)
    ;; a memory counter: undone by the restore
    (i32.store8 (i32.const 77)
      (i32.add (i32.load8_u (i32.const 77)) (i32.const 1)))
    (i64.or (i64.shl (i64.extend_i32_u (global.get $answer)) (i64.const 32)) (i64.const 14))))
