;; raw.wat: a complete hivelet policy (ABI version 1) written against the raw
;; ABI, without the Go SDK: proof that the ABI is language-neutral.
;;
;; Canary: the first `count` nodes as the agent sent them (sorted by node
;; ID), i.e. the spec's default. It declares no fields, attributes or meta,
;; so each node arrives as its ID alone. Completion: always "continue".
;;
;; Assemble: wat2wasm raw.wat -o raw.wasm
(module
  (memory (export "memory") 2)
  ;; read cursor into the input
  (global $pos (mut i32) (i32.const 0))
  ;; write cursor into the answer, which starts at 1024
  (global $out (mut i32) (i32.const 0))

  (data (i32.const 16) "first nodes as sent (raw WAT)")
  ;; completion answer: status 0, decision 0 (continue), revert 0, reason
  (data (i32.const 64) "\00\00\00\18\00\00\00raw module says continue")

  (func (export "hivelet_abi_version") (result i32) (i32.const 1))
  ;; canary (1) | completion (2)
  (func (export "hivelet_kinds") (result i32) (i32.const 3))
  ;; an empty manifest: pointer 0, length 0
  (func (export "hivelet_manifest") (result i64) (i64.const 0))

  ;; The input goes at 65536; grow memory so that n bytes fit there.
  (func (export "hivelet_alloc") (param $n i32) (result i32)
    (local $need i32)
    (local.set $need
      (i32.sub
        (i32.shr_u (i32.add (local.get $n) (i32.const 131071)) (i32.const 16))
        (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then
        (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
          (then unreachable))))
    (i32.const 65536))

  (func $u8 (result i32)
    (local $b i32)
    (local.set $b (i32.load8_u (global.get $pos)))
    (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
    (local.get $b))

  ;; unsigned LEB128; bits past 32 are dropped (only counts are used)
  (func $uvarint (result i32)
    (local $r i32) (local $shift i32) (local $b i32)
    (loop $next
      (local.set $b (call $u8))
      (if (i32.lt_u (local.get $shift) (i32.const 32))
        (then
          (local.set $r
            (i32.or (local.get $r)
              (i32.shl (i32.and (local.get $b) (i32.const 0x7f)) (local.get $shift))))))
      (local.set $shift (i32.add (local.get $shift) (i32.const 7)))
      (br_if $next (i32.and (local.get $b) (i32.const 0x80))))
    (local.get $r))

  ;; a string: 4-byte little-endian length, then the bytes
  (func $skipstr
    (global.set $pos
      (i32.add (global.get $pos) (i32.add (i32.const 4) (i32.load (global.get $pos))))))

  ;; an optional string: length 0xFFFFFFFF means absent (no bytes)
  (func $skipopt
    (if (i32.eq (i32.load (global.get $pos)) (i32.const -1))
      (then (global.set $pos (i32.add (global.get $pos) (i32.const 4))))
      (else (call $skipstr))))

  (func $skipn (param $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (call $skipstr)
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))

  (func $putuvarint (param $v i32)
    (loop $next
      (if (i32.ge_u (local.get $v) (i32.const 0x80))
        (then
          (i32.store8 (global.get $out) (i32.or (local.get $v) (i32.const 0x80)))
          (global.set $out (i32.add (global.get $out) (i32.const 1)))
          (local.set $v (i32.shr_u (local.get $v) (i32.const 7)))
          (br $next))))
    (i32.store8 (global.get $out) (local.get $v))
    (global.set $out (i32.add (global.get $out) (i32.const 1))))

  (func (export "hivelet_canary") (param $p i32) (param $n i32) (result i64)
    (local $count i32) (local $skip i32) (local $width i32) (local $k i32)
    (local $nodes i32) (local $take i32) (local $i i32) (local $len i32)
    (global.set $pos (local.get $p))
    (call $skipstr)                       ;; job ID
    (drop (call $uvarint))                ;; job version
    (call $skipstr)                       ;; deployment ID
    (call $skipstr)                       ;; group
    (drop (call $uvarint))                ;; percent
    (local.set $count (call $uvarint))    ;; count
    (call $skipn (i32.mul (call $uvarint) (i32.const 2)))   ;; params: key, value
    (local.set $skip (i32.popcnt (call $u8)))               ;; fixed fields per node
    (local.set $k (call $uvarint)) (call $skipn (local.get $k))  ;; attribute keys
    (local.set $width (local.get $k))
    (local.set $k (call $uvarint)) (call $skipn (local.get $k))  ;; meta keys
    (local.set $width (i32.add (local.get $width) (local.get $k)))
    (local.set $nodes (call $uvarint))
    (local.set $take (select (local.get $count) (local.get $nodes)
                       (i32.lt_u (local.get $count) (local.get $nodes))))
    ;; answer: status, count, IDs, reason
    (global.set $out (i32.const 1024))
    (i32.store8 (global.get $out) (i32.const 0))
    (global.set $out (i32.const 1025))
    (call $putuvarint (local.get $take))
    (block $done
      (loop $node
        (br_if $done (i32.ge_u (local.get $i) (local.get $nodes)))
        (local.set $len (i32.load (global.get $pos)))
        (if (i32.lt_u (local.get $i) (local.get $take))
          (then
            (i32.store (global.get $out) (local.get $len))
            (memory.copy (i32.add (global.get $out) (i32.const 4))
                         (i32.add (global.get $pos) (i32.const 4))
                         (local.get $len))
            (global.set $out (i32.add (global.get $out) (i32.add (i32.const 4) (local.get $len))))))
        (call $skipstr)                   ;; the ID
        (call $skipn (local.get $skip))   ;; fixed fields
        (local.set $k (local.get $width))
        (block $vals_done
          (loop $val
            (br_if $vals_done (i32.eqz (local.get $k)))
            (call $skipopt)
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))
            (br $val)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $node)))
    (i32.store (global.get $out) (i32.const 29))
    (memory.copy (i32.add (global.get $out) (i32.const 4)) (i32.const 16) (i32.const 29))
    (global.set $out (i32.add (global.get $out) (i32.const 33)))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32))
            (i64.extend_i32_u (i32.sub (global.get $out) (i32.const 1024)))))

  (func (export "hivelet_completion") (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.const 64) (i64.const 32)) (i64.const 31))))
