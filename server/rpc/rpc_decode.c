/* rpc_decode.c — a request's bytes to its protobuf-c message, with the two checks protobuf-c
 * does not make (docs/api.md §1, §16):
 *   - a string field carrying a NUL byte: protobuf-c hands strings out NUL-terminated, so the
 *     value would be cut short silently;
 *   - a singular message field sent more than once: protobuf requires the copies to be merged;
 *     protobuf-c 1.4 merges them but drops the proto3 scalars of the earlier copy (a `key` sent
 *     twice loses its phase), so the request the server would act on is not the one sent. No
 *     generated encoder writes a field twice; the request is refused, naming the field.
 * Both are found by one walk over the wire bytes with the message descriptor, after a
 * successful unpack; anything the walk does not understand ends it without a verdict. */
#include <stdio.h>
#include <string.h>

#include "rpc_internal.h"

#define SCAN_DEPTH_MAX 8

typedef enum wire_problem { WIRE_OK, WIRE_NUL, WIRE_REPEATED } wire_problem;

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

/* Skips a field of wire type `type` (not length-delimited); false when it cannot. */
static bool skip_fixed(int type, const uint8_t **p, const uint8_t *end) {
  uint64_t n;
  switch (type) {
    case 0:
      return read_varint(p, end, &n);
    case 1:
      if (end - *p < 8) return false;
      *p += 8;
      return true;
    case 5:
      if (end - *p < 4) return false;
      *p += 4;
      return true;
    default: /* groups: not used by our protos */
      return false;
  }
}

/* The first problem in the message d encoded in p..p+len; its field's dotted path in bad. */
static wire_problem scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                         int depth, char *bad, size_t bad_cap) {
  const uint8_t *end = p + len;
  uint64_t seen = 0; /* singular message fields met so far, by field number (1-63) */
  while (p < end) {
    uint64_t key, n;
    if (!read_varint(&p, end, &key)) return WIRE_OK;
    if ((key & 7) != 2) {
      if (!skip_fixed((int)(key & 7), &p, end)) return WIRE_OK;
      continue;
    }
    if (!read_varint(&p, end, &n) || n > (uint64_t)(end - p)) return WIRE_OK;
    uint64_t tag = key >> 3;
    const ProtobufCFieldDescriptor *f =
        tag <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)tag) : NULL;
    if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, '\0', n)) {
      snprintf(bad, bad_cap, "%s", f->name);
      return WIRE_NUL;
    }
    if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
      if (f->label != PROTOBUF_C_LABEL_REPEATED && tag < 64) {
        if (seen & (1ull << tag)) {
          snprintf(bad, bad_cap, "%s", f->name);
          return WIRE_REPEATED;
        }
        seen |= 1ull << tag;
      }
      char sub[128];
      wire_problem w =
          depth < SCAN_DEPTH_MAX ? scan(f->descriptor, p, n, depth + 1, sub, sizeof sub) : WIRE_OK;
      if (w != WIRE_OK) {
        snprintf(bad, bad_cap, "%s.%s", f->name, sub);
        return w;
      }
    }
    p += n;
  }
  return WIRE_OK;
}

ProtobufCMessage *rpc__decode(grpc_byte_buffer *payload, const ProtobufCMessageDescriptor *desc,
                              err_t *err) {
  if (!payload) {
    err_set(err, ERR_INVALID, "request: no message was sent");
    return NULL;
  }
  grpc_byte_buffer_reader reader;
  if (!grpc_byte_buffer_reader_init(&reader, payload)) {
    err_set(err, ERR_INVALID, "request: cannot decode as %s", desc->name);
    return NULL;
  }
  grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  const uint8_t *data = GRPC_SLICE_START_PTR(s);
  size_t len = GRPC_SLICE_LENGTH(s);
  ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, data);
  if (!msg) {
    err_set(err, ERR_INVALID, "request: cannot decode as %s", desc->name);
  } else {
    char bad[160];
    wire_problem w = scan(desc, data, len, 0, bad, sizeof bad);
    if (w == WIRE_NUL) err_set(err, ERR_INVALID, "%s: must not contain a NUL byte", bad);
    if (w == WIRE_REPEATED)
      err_set(err, ERR_INVALID, "%s: given more than once (send each message field once)", bad);
    if (w != WIRE_OK) {
      protobuf_c_message_free_unpacked(msg, NULL);
      msg = NULL;
    }
  }
  grpc_slice_unref(s);
  return msg;
}
