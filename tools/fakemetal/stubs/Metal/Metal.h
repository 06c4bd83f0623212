// Metal, as far as native/metal/device.mm uses it: hand-written from Apple's documentation (each
// declaration's comment is the documented signature it copies), with Apple's availability and
// deprecation attributes so -Werror fails here first. Not Apple's header: checked against the real SDK
// only on a Mac (`npm run test:metal`).
#pragma once
#import <Foundation/Foundation.h>

NS_ASSUME_NONNULL_BEGIN
// typedef struct { NSUInteger width, height, depth; } MTLSize; MTLSize MTLSizeMake(NSUInteger, NSUInteger, NSUInteger);
typedef struct {
  NSUInteger width, height, depth;
} MTLSize;
static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
  MTLSize s = {width, height, depth};
  return s;
}
// typedef NS_OPTIONS(NSUInteger, MTLResourceOptions)
typedef NS_OPTIONS(NSUInteger, MTLResourceOptions){
    MTLResourceCPUCacheModeDefaultCache = 0,
    MTLResourceStorageModeShared = 0 << 4,
    MTLResourceStorageModePrivate = 2 << 4,
    MTLResourceHazardTrackingModeUntracked = 1 << 8,
};
// typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus)
typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus){
    MTLCommandBufferStatusNotEnqueued = 0, MTLCommandBufferStatusEnqueued = 1, MTLCommandBufferStatusCommitted = 2,
    MTLCommandBufferStatusScheduled = 3,   MTLCommandBufferStatusCompleted = 4, MTLCommandBufferStatusError = 5,
};
// typedef NS_ENUM(NSUInteger, MTLLanguageVersion)
typedef NS_ENUM(NSUInteger, MTLLanguageVersion){
    MTLLanguageVersion3_0 TESSERA_MACOS_AVAILABLE(13.0) = (3 << 16) + 0,
    MTLLanguageVersion3_1 TESSERA_MACOS_AVAILABLE(14.0) = (3 << 16) + 1,
};
#if __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
// typedef NS_ENUM(NSInteger, MTLMathMode) API_AVAILABLE(macos(15.0)): in the macOS 15 SDK only
typedef NS_ENUM(NSInteger, MTLMathMode){
    MTLMathModeSafe = 0,
    MTLMathModeRelaxed = 1,
    MTLMathModeFast = 2,
} TESSERA_MACOS_AVAILABLE(15.0);
#endif
// typedef NS_ENUM(NSInteger, MTLGPUFamily) (MTLGPUFamilyApple9: macOS 14 SDK; MTLGPUFamilyMetal3: macOS 13)
typedef NS_ENUM(NSInteger, MTLGPUFamily){
    MTLGPUFamilyApple1 = 1001, MTLGPUFamilyApple2 = 1002, MTLGPUFamilyApple3 = 1003, MTLGPUFamilyApple4 = 1004,
    MTLGPUFamilyApple5 = 1005, MTLGPUFamilyApple6 = 1006, MTLGPUFamilyApple7 = 1007, MTLGPUFamilyApple8 = 1008,
#if __MAC_OS_X_VERSION_MAX_ALLOWED >= 140000
    MTLGPUFamilyApple9 TESSERA_MACOS_AVAILABLE(14.0) = 1009,
#endif
    MTLGPUFamilyMac2 = 2002, MTLGPUFamilyCommon1 = 3001, MTLGPUFamilyCommon2 = 3002, MTLGPUFamilyCommon3 = 3003,
    MTLGPUFamilyMetal3 TESSERA_MACOS_AVAILABLE(13.0) = 5001,
};

@protocol MTLDevice, MTLCommandBuffer;
// @protocol MTLResource <NSObject>: @property(readonly) id<MTLDevice> device;
@protocol MTLResource <NSObject>
@property(readonly) id<MTLDevice> device;
@end
// @protocol MTLBuffer <MTLResource>: - (void *)contents; @property(readonly) NSUInteger length;
@protocol MTLBuffer <MTLResource>
- (void*)contents;
@property(readonly) NSUInteger length;
@end
// @protocol MTLFunction <NSObject>: @property(readonly) NSString *name;
@protocol MTLFunction <NSObject>
@property(readonly) NSString* name;
@end
// @protocol MTLLibrary <NSObject>: - (nullable id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
@protocol MTLLibrary <NSObject>
- (nullable id<MTLFunction>)newFunctionWithName:(NSString*)functionName;
@end
// @protocol MTLComputePipelineState <NSObject>
@protocol MTLComputePipelineState <NSObject>
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property(readonly) NSUInteger threadExecutionWidth;
@property(readonly) NSUInteger staticThreadgroupMemoryLength;
@end
// @protocol MTLCommandEncoder <NSObject>: - (void)endEncoding;
@protocol MTLCommandEncoder <NSObject>
- (void)endEncoding;
@end
// @protocol MTLComputeCommandEncoder <MTLCommandEncoder>
@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBytes:(const void*)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
@end
// typedef void (^MTLCommandBufferHandler)(id<MTLCommandBuffer>);
typedef void (^MTLCommandBufferHandler)(id<MTLCommandBuffer>);
// @protocol MTLCommandBuffer <NSObject>
@protocol MTLCommandBuffer <NSObject>
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (void)addCompletedHandler:(MTLCommandBufferHandler)block;
- (void)commit;
- (void)waitUntilCompleted;
@property(readonly) MTLCommandBufferStatus status;
@property(nullable, readonly) NSError* error;
@end
// @protocol MTLCommandQueue <NSObject>: - (nullable id<MTLCommandBuffer>)commandBuffer;
@protocol MTLCommandQueue <NSObject>
- (nullable id<MTLCommandBuffer>)commandBuffer;
@end
// @interface MTLCompileOptions : NSObject <NSCopying>
@interface MTLCompileOptions : NSObject
#if __MAC_OS_X_VERSION_MAX_ALLOWED >= 150000
@property(readwrite, nonatomic) BOOL fastMathEnabled TESSERA_MACOS_DEPRECATED(10.11, 15.0, "Use mathMode instead");
@property(readwrite, nonatomic) MTLMathMode mathMode TESSERA_MACOS_AVAILABLE(15.0);
#else
@property(readwrite, nonatomic) BOOL fastMathEnabled;
#endif
@property(readwrite, nonatomic) MTLLanguageVersion languageVersion;
@end
// @protocol MTLDevice <NSObject>
@protocol MTLDevice <NSObject>
@property(readonly) NSString* name;
@property(readonly) NSUInteger maxThreadgroupMemoryLength;
@property(readonly) NSUInteger maxBufferLength;
@property(readonly) BOOL hasUnifiedMemory;
@property(readonly) uint64_t recommendedMaxWorkingSetSize;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily;
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void*)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^_Nullable)(void* pointer, NSUInteger length))deallocator;
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL*)url error:(NSError**)error;
- (nullable id<MTLLibrary>)newLibraryWithSource:(NSString*)source options:(nullable MTLCompileOptions*)options error:(NSError**)error;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction error:(NSError**)error;
@end
// id<MTLDevice> MTLCreateSystemDefaultDevice(void);
#ifdef __cplusplus
extern "C"
#endif
    id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void);
NS_ASSUME_NONNULL_END
