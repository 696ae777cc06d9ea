// The dynamic loader's own dlsym, which the shim's dlsym override forwards to.
#pragma once

namespace gpumemshim::shim {

using DlsymFn = void* (*)(void*, const char*);

// Found with dlvsym (never through our override), GLIBC_2.34 first, then GLIBC_2.2.5.
DlsymFn real_dlsym();

}  // namespace gpumemshim::shim
