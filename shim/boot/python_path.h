// Zero-code-change PyTorch support: the shim puts the directory that holds its
// Python boot files (sitecustomize.py and the gpumemshim package, next to libgpumemshim.so) at
// the front of PYTHONPATH, so a Python process started under the shim loads the torch bridge at
// CUDA initialisation without an import in the user's script.
#pragma once

namespace gpumemshim::shim {

// Called once from the shim's constructor, before the host's main (and so before the Python
// interpreter reads PYTHONPATH). Does nothing when GPUMEMSHIM_PYTHON_BOOT=0, when the boot
// directory is missing, or when PYTHONPATH already starts with it (an exec'd child).
void add_python_boot_path();

}  // namespace gpumemshim::shim
