#include "next_symbol.h"

#include <dlfcn.h>

#include "../log.h"

namespace gpumemshim::shim {

void* next_symbol(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) log_debug("no definition of %s after the shim", name);
  return p;
}

}  // namespace gpumemshim::shim
