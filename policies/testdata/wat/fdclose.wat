;; fdclose.wat: a hostile completion policy that keeps state in the host's
;; WASI file descriptor table. Each call writes a byte to stderr, puts the
;; write's errno in its reason ("errno=N"), then closes stderr: if the
;; close survived between evaluations, the second evaluation would say
;; errno=8 (EBADF).
;;
;; Assemble: wat2wasm fdclose.wat -o fdclose.wasm
(module
  (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 64) "\00\00\00\07\00\00\00errno=0")
  (data (i32.const 200) "x")
  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  (func (export "hivelet_kinds") (result i32) (i32.const 2))
  (func (export "hivelet_manifest") (result i64) (i64.const 0))
  (func (export "hivelet_alloc") (param $n i32) (result i32) (i32.const 4096))
  (func (export "hivelet_completion") (param $p i32) (param $n i32) (result i64)
    ;; one iovec at 300: 1 byte at 200
    (i32.store (i32.const 300) (i32.const 200))
    (i32.store (i32.const 304) (i32.const 1))
    (i32.store8 (i32.const 77) (i32.add (i32.const 48)
      (call $fd_write (i32.const 2) (i32.const 300) (i32.const 1) (i32.const 308))))
    (drop (call $fd_close (i32.const 2)))
    (i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 14))))
