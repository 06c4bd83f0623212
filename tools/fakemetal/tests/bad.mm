// Planted errors for `npm run check:objc`: the ARC type check must reject this file with exactly these
// four errors (test/metal-objc.test.ts), proving the check would catch them in device.mm.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
void bad(id<MTLDevice> dev, id<MTLComputeCommandEncoder> enc, id<MTLBuffer> buf) {
  [buf release];                                                             // ARC forbids explicit release
  [enc setBuffer:buf offset:0 index:0];                                      // misspelled selector (atIndex:)
  void* raw = (void*)buf;                                                    // needs a __bridge cast under ARC
  [enc dispatchThreadgroups:MTLSizeMake(1, 1, 1) threadsPerThreadgroup:64];  // an int is not an MTLSize
  id<MTLBuffer> b2 = [dev newBufferWithLength:16 options:MTLResourceStorageModeShared];
  (void)raw;
  (void)b2;
}
