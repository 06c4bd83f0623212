/* Loads a Node-API addon the way Node does (dlopen), outside Node: used under qemu-user to show that a
 * cross-built linux-arm64 prebuild links and loads on arm64 (test/package-install.test.ts). The napi_*
 * functions the addon imports are Node's own; the test links this loader with -rdynamic and a generated
 * stub for each of them, so that every symbol resolves as it would in Node. None is called. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void* init = dlsym(h, "napi_register_module_v1");
  printf("%s\n", init ? "napi_register_module_v1 found" : "napi_register_module_v1 missing");
  return init ? 0 : 1;
}
