; The llvm back end's prelude: fixed helper functions, written once in LLVM IR, that generated
; kernels call (backends/llvm/render.py declares what a module calls; backends/llvm/build.py
; links this file into a module that calls any of them, before optimising it). Each is
; linkonce_odr and alwaysinline: O3 inlines every call before its other passes run, so a
; kernel's machine code is what it would be had the renderer written the body in place, and
; the functions themselves are dropped. The C++ back end's prelude.h holds the same helpers.
;
; bf16 storage (i16 bits) and the f32 it is computed in: widening moves the bits up; narrowing
; rounds to nearest even, a NaN becomes the quiet NaN 0x7fc0 (the C++ prelude's fir_from_bf16
; and fir_to_bf16, torch's conversion)
define linkonce_odr float @fir_from_bf16(i16 %b) alwaysinline {
  %wide = zext i16 %b to i32
  %bits = shl i32 %wide, 16
  %f = bitcast i32 %bits to float
  ret float %f
}

define linkonce_odr i16 @fir_to_bf16(float %f) alwaysinline {
  %u = bitcast float %f to i32
  %high = lshr i32 %u, 16
  %odd = and i32 %high, 1
  %bias = add i32 32767, %odd
  %sum = add i32 %u, %bias
  %rounded = lshr i32 %sum, 16
  %nan = fcmp uno float %f, %f
  %bits = select i1 %nan, i32 32704, i32 %rounded
  %b = trunc i32 %bits to i16
  ret i16 %b
}

; Turned tiles (the schedule's turned loads, backends/plan/schedule.py): a tile of a transposed
; read copied, turned, to a stack array, from which the tile's loops read it in order. The copy
; moves the elements' bits: 32-bit lanes for f32 and i32, 16-bit ones for f16, bf16 and i16.
;
; fir_turn32(dst, src, stride, rows, cols, side): dst[j + i * side] = src[i + j * stride] for
; i < rows, j < cols; 8 x 8 blocks through the shuffles of a register transpose (fir_turn8x32),
; then the edges one element at a time: rows from the last whole block in the columns of whole
; blocks, every row in the rest. No loop is unrolled: the blocks are vector code already.
define linkonce_odr void @fir_turn32(ptr %dst, ptr %src, i64 %stride, i64 %rows, i64 %cols, i64 %side) alwaysinline {
entry:
  %r8 = and i64 %rows, -8
  %c8 = and i64 %cols, -8
  br label %blocks.j
blocks.j:
  %j = phi i64 [ 0, %entry ], [ %j.next, %blocks.i.done ]
  %j.in = icmp slt i64 %j, %c8
  br i1 %j.in, label %blocks.i, label %edges.j
blocks.i:
  %i = phi i64 [ 0, %blocks.j ], [ %i.next, %blocks.i.body ]
  %i.in = icmp slt i64 %i, %r8
  br i1 %i.in, label %blocks.i.body, label %blocks.i.done
blocks.i.body:
  %from = call ptr @fir_at32(ptr %src, i64 %i, i64 %j, i64 %stride)
  %to = call ptr @fir_at32(ptr %dst, i64 %j, i64 %i, i64 %side)
  call void @fir_turn8x32(ptr %to, i64 %side, ptr %from, i64 %stride)
  %i.next = add i64 %i, 8
  br label %blocks.i, !llvm.loop !1
blocks.i.done:
  %j.next = add i64 %j, 8
  br label %blocks.j, !llvm.loop !2
edges.j:
  %ej = phi i64 [ 0, %blocks.j ], [ %ej.next, %edges.i.done ]
  %ej.in = icmp slt i64 %ej, %cols
  br i1 %ej.in, label %edges.first, label %done
edges.first:
  %beside = icmp slt i64 %ej, %c8
  %first = select i1 %beside, i64 %r8, i64 0
  br label %edges.i
edges.i:
  %ei = phi i64 [ %first, %edges.first ], [ %ei.next, %edges.i.body ]
  %ei.in = icmp slt i64 %ei, %rows
  br i1 %ei.in, label %edges.i.body, label %edges.i.done
edges.i.body:
  %one.from = call ptr @fir_at32(ptr %src, i64 %ei, i64 %ej, i64 %stride)
  %one.to = call ptr @fir_at32(ptr %dst, i64 %ej, i64 %ei, i64 %side)
  %one = load i32, ptr %one.from, align 4
  store i32 %one, ptr %one.to, align 4
  %ei.next = add i64 %ei, 1
  br label %edges.i, !llvm.loop !3
edges.i.done:
  %ej.next = add i64 %ej, 1
  br label %edges.j, !llvm.loop !4
done:
  ret void
}

; fir_turn8x32(dst, dst_stride, src, stride): the 8 x 8 block whose rows are the vectors at src,
; src + stride, ... stored turned: its columns at dst, dst + dst_stride, ... The shuffles
; interleave pairs of rows, then pairs of pairs, then the 128-bit halves (each mask picks from
; the two operands' 16 lanes).
define linkonce_odr void @fir_turn8x32(ptr %dst, i64 %dst_stride, ptr %src, i64 %stride) alwaysinline {
  ; the eight rows
  %r0 = load <8 x i32>, ptr %src, align 4
  %at1 = mul i64 %stride, 1
  %p1 = getelementptr i32, ptr %src, i64 %at1
  %r1 = load <8 x i32>, ptr %p1, align 4
  %at2 = mul i64 %stride, 2
  %p2 = getelementptr i32, ptr %src, i64 %at2
  %r2 = load <8 x i32>, ptr %p2, align 4
  %at3 = mul i64 %stride, 3
  %p3 = getelementptr i32, ptr %src, i64 %at3
  %r3 = load <8 x i32>, ptr %p3, align 4
  %at4 = mul i64 %stride, 4
  %p4 = getelementptr i32, ptr %src, i64 %at4
  %r4 = load <8 x i32>, ptr %p4, align 4
  %at5 = mul i64 %stride, 5
  %p5 = getelementptr i32, ptr %src, i64 %at5
  %r5 = load <8 x i32>, ptr %p5, align 4
  %at6 = mul i64 %stride, 6
  %p6 = getelementptr i32, ptr %src, i64 %at6
  %r6 = load <8 x i32>, ptr %p6, align 4
  %at7 = mul i64 %stride, 7
  %p7 = getelementptr i32, ptr %src, i64 %at7
  %r7 = load <8 x i32>, ptr %p7, align 4
  ; pairs interleaved
  %t0 = shufflevector <8 x i32> %r0, <8 x i32> %r1, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t1 = shufflevector <8 x i32> %r0, <8 x i32> %r1, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t2 = shufflevector <8 x i32> %r2, <8 x i32> %r3, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t3 = shufflevector <8 x i32> %r2, <8 x i32> %r3, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t4 = shufflevector <8 x i32> %r4, <8 x i32> %r5, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t5 = shufflevector <8 x i32> %r4, <8 x i32> %r5, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t6 = shufflevector <8 x i32> %r6, <8 x i32> %r7, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t7 = shufflevector <8 x i32> %r6, <8 x i32> %r7, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  ; pairs of pairs
  %u0 = shufflevector <8 x i32> %t0, <8 x i32> %t2, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u1 = shufflevector <8 x i32> %t0, <8 x i32> %t2, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u2 = shufflevector <8 x i32> %t1, <8 x i32> %t3, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u3 = shufflevector <8 x i32> %t1, <8 x i32> %t3, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u4 = shufflevector <8 x i32> %t4, <8 x i32> %t6, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u5 = shufflevector <8 x i32> %t4, <8 x i32> %t6, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u6 = shufflevector <8 x i32> %t5, <8 x i32> %t7, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u7 = shufflevector <8 x i32> %t5, <8 x i32> %t7, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  ; the 128-bit halves: the columns, stored as rows of dst
  %c0 = shufflevector <8 x i32> %u0, <8 x i32> %u4, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c4 = shufflevector <8 x i32> %u0, <8 x i32> %u4, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c1 = shufflevector <8 x i32> %u1, <8 x i32> %u5, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c5 = shufflevector <8 x i32> %u1, <8 x i32> %u5, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c2 = shufflevector <8 x i32> %u2, <8 x i32> %u6, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c6 = shufflevector <8 x i32> %u2, <8 x i32> %u6, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c3 = shufflevector <8 x i32> %u3, <8 x i32> %u7, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c7 = shufflevector <8 x i32> %u3, <8 x i32> %u7, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  store <8 x i32> %c0, ptr %dst, align 4
  %to1 = mul i64 %dst_stride, 1
  %q1 = getelementptr i32, ptr %dst, i64 %to1
  store <8 x i32> %c1, ptr %q1, align 4
  %to2 = mul i64 %dst_stride, 2
  %q2 = getelementptr i32, ptr %dst, i64 %to2
  store <8 x i32> %c2, ptr %q2, align 4
  %to3 = mul i64 %dst_stride, 3
  %q3 = getelementptr i32, ptr %dst, i64 %to3
  store <8 x i32> %c3, ptr %q3, align 4
  %to4 = mul i64 %dst_stride, 4
  %q4 = getelementptr i32, ptr %dst, i64 %to4
  store <8 x i32> %c4, ptr %q4, align 4
  %to5 = mul i64 %dst_stride, 5
  %q5 = getelementptr i32, ptr %dst, i64 %to5
  store <8 x i32> %c5, ptr %q5, align 4
  %to6 = mul i64 %dst_stride, 6
  %q6 = getelementptr i32, ptr %dst, i64 %to6
  store <8 x i32> %c6, ptr %q6, align 4
  %to7 = mul i64 %dst_stride, 7
  %q7 = getelementptr i32, ptr %dst, i64 %to7
  store <8 x i32> %c7, ptr %q7, align 4
  ret void
}

; fir_at32(p, i, j, step): the address of element i + j * step of p
define linkonce_odr ptr @fir_at32(ptr %p, i64 %i, i64 %j, i64 %step) alwaysinline {
  %along = mul i64 %j, %step
  %k = add i64 %i, %along
  %q = getelementptr i32, ptr %p, i64 %k
  ret ptr %q
}

; the same for 16-bit lanes
define linkonce_odr void @fir_turn16(ptr %dst, ptr %src, i64 %stride, i64 %rows, i64 %cols, i64 %side) alwaysinline {
entry:
  %r8 = and i64 %rows, -8
  %c8 = and i64 %cols, -8
  br label %blocks.j
blocks.j:
  %j = phi i64 [ 0, %entry ], [ %j.next, %blocks.i.done ]
  %j.in = icmp slt i64 %j, %c8
  br i1 %j.in, label %blocks.i, label %edges.j
blocks.i:
  %i = phi i64 [ 0, %blocks.j ], [ %i.next, %blocks.i.body ]
  %i.in = icmp slt i64 %i, %r8
  br i1 %i.in, label %blocks.i.body, label %blocks.i.done
blocks.i.body:
  %from = call ptr @fir_at16(ptr %src, i64 %i, i64 %j, i64 %stride)
  %to = call ptr @fir_at16(ptr %dst, i64 %j, i64 %i, i64 %side)
  call void @fir_turn8x16(ptr %to, i64 %side, ptr %from, i64 %stride)
  %i.next = add i64 %i, 8
  br label %blocks.i, !llvm.loop !5
blocks.i.done:
  %j.next = add i64 %j, 8
  br label %blocks.j, !llvm.loop !6
edges.j:
  %ej = phi i64 [ 0, %blocks.j ], [ %ej.next, %edges.i.done ]
  %ej.in = icmp slt i64 %ej, %cols
  br i1 %ej.in, label %edges.first, label %done
edges.first:
  %beside = icmp slt i64 %ej, %c8
  %first = select i1 %beside, i64 %r8, i64 0
  br label %edges.i
edges.i:
  %ei = phi i64 [ %first, %edges.first ], [ %ei.next, %edges.i.body ]
  %ei.in = icmp slt i64 %ei, %rows
  br i1 %ei.in, label %edges.i.body, label %edges.i.done
edges.i.body:
  %one.from = call ptr @fir_at16(ptr %src, i64 %ei, i64 %ej, i64 %stride)
  %one.to = call ptr @fir_at16(ptr %dst, i64 %ej, i64 %ei, i64 %side)
  %one = load i16, ptr %one.from, align 2
  store i16 %one, ptr %one.to, align 2
  %ei.next = add i64 %ei, 1
  br label %edges.i, !llvm.loop !7
edges.i.done:
  %ej.next = add i64 %ej, 1
  br label %edges.j, !llvm.loop !8
done:
  ret void
}

define linkonce_odr void @fir_turn8x16(ptr %dst, i64 %dst_stride, ptr %src, i64 %stride) alwaysinline {
  ; the eight rows
  %r0 = load <8 x i16>, ptr %src, align 2
  %at1 = mul i64 %stride, 1
  %p1 = getelementptr i16, ptr %src, i64 %at1
  %r1 = load <8 x i16>, ptr %p1, align 2
  %at2 = mul i64 %stride, 2
  %p2 = getelementptr i16, ptr %src, i64 %at2
  %r2 = load <8 x i16>, ptr %p2, align 2
  %at3 = mul i64 %stride, 3
  %p3 = getelementptr i16, ptr %src, i64 %at3
  %r3 = load <8 x i16>, ptr %p3, align 2
  %at4 = mul i64 %stride, 4
  %p4 = getelementptr i16, ptr %src, i64 %at4
  %r4 = load <8 x i16>, ptr %p4, align 2
  %at5 = mul i64 %stride, 5
  %p5 = getelementptr i16, ptr %src, i64 %at5
  %r5 = load <8 x i16>, ptr %p5, align 2
  %at6 = mul i64 %stride, 6
  %p6 = getelementptr i16, ptr %src, i64 %at6
  %r6 = load <8 x i16>, ptr %p6, align 2
  %at7 = mul i64 %stride, 7
  %p7 = getelementptr i16, ptr %src, i64 %at7
  %r7 = load <8 x i16>, ptr %p7, align 2
  ; pairs interleaved
  %t0 = shufflevector <8 x i16> %r0, <8 x i16> %r1, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t1 = shufflevector <8 x i16> %r0, <8 x i16> %r1, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t2 = shufflevector <8 x i16> %r2, <8 x i16> %r3, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t3 = shufflevector <8 x i16> %r2, <8 x i16> %r3, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t4 = shufflevector <8 x i16> %r4, <8 x i16> %r5, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t5 = shufflevector <8 x i16> %r4, <8 x i16> %r5, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  %t6 = shufflevector <8 x i16> %r6, <8 x i16> %r7, <8 x i32> <i32 0, i32 8, i32 1, i32 9, i32 4, i32 12, i32 5, i32 13>
  %t7 = shufflevector <8 x i16> %r6, <8 x i16> %r7, <8 x i32> <i32 2, i32 10, i32 3, i32 11, i32 6, i32 14, i32 7, i32 15>
  ; pairs of pairs
  %u0 = shufflevector <8 x i16> %t0, <8 x i16> %t2, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u1 = shufflevector <8 x i16> %t0, <8 x i16> %t2, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u2 = shufflevector <8 x i16> %t1, <8 x i16> %t3, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u3 = shufflevector <8 x i16> %t1, <8 x i16> %t3, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u4 = shufflevector <8 x i16> %t4, <8 x i16> %t6, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u5 = shufflevector <8 x i16> %t4, <8 x i16> %t6, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  %u6 = shufflevector <8 x i16> %t5, <8 x i16> %t7, <8 x i32> <i32 0, i32 1, i32 8, i32 9, i32 4, i32 5, i32 12, i32 13>
  %u7 = shufflevector <8 x i16> %t5, <8 x i16> %t7, <8 x i32> <i32 2, i32 3, i32 10, i32 11, i32 6, i32 7, i32 14, i32 15>
  ; the 128-bit halves: the columns, stored as rows of dst
  %c0 = shufflevector <8 x i16> %u0, <8 x i16> %u4, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c4 = shufflevector <8 x i16> %u0, <8 x i16> %u4, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c1 = shufflevector <8 x i16> %u1, <8 x i16> %u5, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c5 = shufflevector <8 x i16> %u1, <8 x i16> %u5, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c2 = shufflevector <8 x i16> %u2, <8 x i16> %u6, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c6 = shufflevector <8 x i16> %u2, <8 x i16> %u6, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  %c3 = shufflevector <8 x i16> %u3, <8 x i16> %u7, <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 8, i32 9, i32 10, i32 11>
  %c7 = shufflevector <8 x i16> %u3, <8 x i16> %u7, <8 x i32> <i32 4, i32 5, i32 6, i32 7, i32 12, i32 13, i32 14, i32 15>
  store <8 x i16> %c0, ptr %dst, align 2
  %to1 = mul i64 %dst_stride, 1
  %q1 = getelementptr i16, ptr %dst, i64 %to1
  store <8 x i16> %c1, ptr %q1, align 2
  %to2 = mul i64 %dst_stride, 2
  %q2 = getelementptr i16, ptr %dst, i64 %to2
  store <8 x i16> %c2, ptr %q2, align 2
  %to3 = mul i64 %dst_stride, 3
  %q3 = getelementptr i16, ptr %dst, i64 %to3
  store <8 x i16> %c3, ptr %q3, align 2
  %to4 = mul i64 %dst_stride, 4
  %q4 = getelementptr i16, ptr %dst, i64 %to4
  store <8 x i16> %c4, ptr %q4, align 2
  %to5 = mul i64 %dst_stride, 5
  %q5 = getelementptr i16, ptr %dst, i64 %to5
  store <8 x i16> %c5, ptr %q5, align 2
  %to6 = mul i64 %dst_stride, 6
  %q6 = getelementptr i16, ptr %dst, i64 %to6
  store <8 x i16> %c6, ptr %q6, align 2
  %to7 = mul i64 %dst_stride, 7
  %q7 = getelementptr i16, ptr %dst, i64 %to7
  store <8 x i16> %c7, ptr %q7, align 2
  ret void
}

define linkonce_odr ptr @fir_at16(ptr %p, i64 %i, i64 %j, i64 %step) alwaysinline {
  %along = mul i64 %j, %step
  %k = add i64 %i, %along
  %q = getelementptr i16, ptr %p, i64 %k
  ret ptr %q
}

; the loops' properties: each loop its own ID, none unrolled
!0 = !{!"llvm.loop.unroll.disable"}
!1 = distinct !{!1, !0}
!2 = distinct !{!2, !0}
!3 = distinct !{!3, !0}
!4 = distinct !{!4, !0}
!5 = distinct !{!5, !0}
!6 = distinct !{!6, !0}
!7 = distinct !{!7, !0}
!8 = distinct !{!8, !0}
