/* Prints the CPython field offsets shim/stack/python_stack.cpp hard-codes, measured with offsetof()
 * against an installed interpreter's headers (3.11 or 3.12):
 *   cc -I"$(python3.12 -c 'import sysconfig; print(sysconfig.get_path("include"))')" \
 *      tests/unit/python_layout_check.c -o layout && ./layout
 * Compare with the Layout constants (kPy311 / kPy312). Not built by CMake: CI has one Python. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#include "internal/pycore_frame.h"

#define O(T, f) printf("%-40s %zu\n", #T "." #f, offsetof(T, f))
int main(void) {
  printf("PY_VERSION_HEX %lx\n", (unsigned long)PY_VERSION_HEX);
  O(PyThreadState, cframe);
  O(_PyCFrame, current_frame);
  O(_PyInterpreterFrame, f_code);
  O(_PyInterpreterFrame, previous);
  O(_PyInterpreterFrame, prev_instr);
#if PY_VERSION_HEX < 0x030C0000
  O(_PyInterpreterFrame, is_entry);
#else
  printf("FRAME_OWNED_BY_CSTACK %d\n", (int)FRAME_OWNED_BY_CSTACK);
#endif
  O(_PyInterpreterFrame, owner);
  O(PyCodeObject, co_firstlineno);
  O(PyCodeObject, co_filename);
  O(PyCodeObject, co_name);
  O(PyCodeObject, co_qualname);
  O(PyCodeObject, co_linetable);
  O(PyCodeObject, _co_firsttraceable);
  O(PyCodeObject, co_code_adaptive);
  printf("%-40s %zu\n", "sizeof(PyASCIIObject)", sizeof(PyASCIIObject));
  O(PyCompactUnicodeObject, utf8_length);
  O(PyCompactUnicodeObject, utf8);
  printf("%-40s %zu\n", "sizeof(PyCompactUnicodeObject)", sizeof(PyCompactUnicodeObject));
  O(PyASCIIObject, state);
  O(PyBytesObject, ob_sval);
  PyASCIIObject a;
  memset(&a, 0, sizeof a); a.state.kind = 7; printf("kind mask %x\n", *(unsigned*)&a.state);
  memset(&a, 0, sizeof a); a.state.compact = 1; printf("compact mask %x\n", *(unsigned*)&a.state);
  memset(&a, 0, sizeof a); a.state.ascii = 1; printf("ascii mask %x\n", *(unsigned*)&a.state);
  return 0;
}
