// The parsers' side of review/semantic's WebAssembly modules: tree-sitter
// and one grammar each, compiled by scripts/build-parsers. One call parses a
// file and lays its whole tree out as flat records (treewasm.go reads
// them), so that nothing of tree-sitter's memory is read node by node from
// Go, and the module's state between calls is only its heap.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "language.h"
#include "subtree.h"

#define EXPORT(name) __attribute__((export_name(name)))

// LANGUAGE is the grammar's function (tree_sitter_python ...), given by
// scripts/build-parsers: a module holds one grammar.
const TSLanguage *LANGUAGE(void);

// A node, in preorder; its parent comes before it (the root's is
// 0xffffffff), and its children follow one another in order.
struct record {
  uint16_t symbol;  // ts_node_symbol
  uint16_t field;   // the field it is in, as a cursor names it; 0: none
  uint32_t flags;   // 1: named, 2: has an error
  uint32_t start_byte, end_byte, start_row;
  uint32_t parent;
};

// A field of a node with children: the node ts_node_child_by_field_id
// finds (hidden nodes and inherited fields make it other than the first
// child the cursor says is in the field, or a deeper node), by its span
// and symbol.
struct field {
  uint32_t parent;  // the node's record
  uint16_t field, symbol;
  uint32_t start_byte, end_byte;
};

// What parse returns: count records at recs, nfields fields at fields.
struct result {
  uint32_t count;
  struct record *recs;
  uint32_t nfields;
  struct field *fields;
};

static struct result result;
static uint32_t fields_cap;

// add_fields appends the fields of n, record i; 0 when memory ran out.
static int add_fields(TSNode n, uint32_t i) {
  if (ts_node_child_count(n) == 0) return 1;
  // The node's production's fields (ts_node_child_by_field_id's own
  // start), sorted by field: each looked up once.
  const TSFieldMapEntry *map, *end;
  TSFieldId last = 0;
  ts_language_field_map(LANGUAGE(), (*(const Subtree *)n.id).ptr->production_id, &map, &end);
  for (; map < end; map++) {
    if (map->field_id == last) continue;
    last = map->field_id;
    TSNode ch = ts_node_child_by_field_id(n, last);
    if (ts_node_is_null(ch)) continue;
    if (result.nfields == fields_cap) {
      uint32_t c = fields_cap ? fields_cap * 2 : 256;
      struct field *grown = realloc(result.fields, (size_t)c * sizeof *grown);
      if (!grown) return 0;
      result.fields = grown;
      fields_cap = c;
    }
    result.fields[result.nfields++] = (struct field){i, last, ts_node_symbol(ch), ts_node_start_byte(ch), ts_node_end_byte(ch)};
  }
  return 1;
}

EXPORT("alloc") void *alloc(uint32_t n) { return malloc(n ? n : 1); }
EXPORT("release") void release(void *p) { free(p); }

EXPORT("symbol_count") uint32_t symbol_count(void) { return ts_language_symbol_count(LANGUAGE()); }

EXPORT("symbol_name") const char *symbol_name(uint32_t sym) {
  return sym < symbol_count() ? ts_language_symbol_name(LANGUAGE(), (TSSymbol)sym) : NULL;
}

EXPORT("field_count") uint32_t field_count(void) { return ts_language_field_count(LANGUAGE()); }

EXPORT("field_name") const char *field_name(uint32_t field) {
  return field > 0 && field <= field_count() ? ts_language_field_name_for_id(LANGUAGE(), (TSFieldId)field) : NULL;
}

// add appends a record for the cursor's node, returning its index, or
// -1 when memory ran out.
static int64_t add(TSTreeCursor *cur, uint32_t parent, uint32_t *cap) {
  if (result.count == *cap) {
    uint32_t n = *cap ? *cap * 2 : 1024;
    struct record *grown = realloc(result.recs, (size_t)n * sizeof *grown);
    if (!grown) return -1;
    result.recs = grown;
    *cap = n;
  }
  TSNode n = ts_tree_cursor_current_node(cur);
  TSPoint start = ts_node_start_point(n);
  struct record *r = &result.recs[result.count];
  r->symbol = ts_node_symbol(n);
  r->field = ts_tree_cursor_current_field_id(cur);
  r->flags = (ts_node_is_named(n) ? 1 : 0) | (ts_node_has_error(n) ? 2 : 0);
  r->start_byte = ts_node_start_byte(n);
  r->end_byte = ts_node_end_byte(n);
  r->start_row = start.row;
  r->parent = parent;
  if (!add_fields(n, result.count)) return -1;
  return result.count++;
}

// parse parses the len bytes at src and returns the tree's records, or
// NULL; the caller frees result.recs and result.fields with release.
EXPORT("parse") struct result *parse(const char *src, uint32_t len) {
  result = (struct result){0};
  fields_cap = 0;
  TSParser *p = ts_parser_new();
  if (!ts_parser_set_language(p, LANGUAGE())) {
    ts_parser_delete(p);
    return NULL;
  }
  TSTree *tree = ts_parser_parse_string(p, NULL, src, len);
  ts_parser_delete(p);
  if (!tree) return NULL;
  TSTreeCursor cur = ts_tree_cursor_new(ts_tree_root_node(tree));
  uint32_t cap = 0, at = UINT32_MAX;
  int ok = 1;
  // at is the record of the cursor's parent: going down, the node just
  // added; going up, that node's own parent.
  for (;;) {
    int64_t i = add(&cur, at, &cap);
    if (i < 0) {
      ok = 0;
      break;
    }
    if (ts_tree_cursor_goto_first_child(&cur)) {
      at = (uint32_t)i;
      continue;
    }
    while (!ts_tree_cursor_goto_next_sibling(&cur)) {
      if (!ts_tree_cursor_goto_parent(&cur)) goto done;
      at = result.recs[at].parent;
    }
  }
done:
  ts_tree_cursor_delete(&cur);
  ts_tree_delete(tree);
  if (!ok) {
    free(result.recs);
    free(result.fields);
    result = (struct result){0};
    return NULL;
  }
  return &result;
}
