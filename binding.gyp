{
  "targets": [
    {
      "target_name": "tessera",
      "sources": [
        "<!@(node scripts/sources.mjs)"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native",
        "<!(node scripts/msl-kernels.mjs headers)"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_ADDON_API_DISABLE_DEPRECATED"
      ],
      "cflags!": [
        "-fno-exceptions"
      ],
      "cflags_cc!": [
        "-fno-exceptions",
        "-fno-rtti"
      ],
      "cflags_cc": [
        "-std=c++20",
        "-O3",
        "-fexceptions",
        "-ffp-contract=off",
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter"
      ],
      "conditions": [
        [
          "OS=='linux'",
          {
            "libraries": [
              "-lpthread"
            ],
            "ldflags": [
              "-static-libstdc++",
              "-static-libgcc"
            ]
          }
        ],
        [
          "OS=='mac'",
          {
            "sources": [
              "native/metal/device.mm"
            ],
            "xcode_settings": {
              "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
              "CLANG_CXX_LANGUAGE_STANDARD": "c++20",
              "CLANG_ENABLE_OBJC_ARC": "YES",
              "MACOSX_DEPLOYMENT_TARGET": "13.0",
              "OTHER_CPLUSPLUSFLAGS": [
                "-O3",
                "-ffp-contract=off"
              ]
            },
            "defines": [
              "TESSERA_HAVE_METAL=1"
            ],
            "link_settings": {
              "libraries": [
                "-framework Metal",
                "-framework Foundation"
              ]
            },
            "actions": [
              {
                "action_name": "metallib",
                "inputs": [
                  "<!@(node scripts/msl-kernels.mjs sources)"
                ],
                "outputs": [
                  "<(PRODUCT_DIR)/tessera.metallib"
                ],
                "action": [
                  "node",
                  "scripts/msl-kernels.mjs",
                  "metallib",
                  "<(PRODUCT_DIR)/tessera.metallib",
                  "--if-toolchain"
                ],
                "message": "Compiling metal/*.metal with xcrun metal -std=metal3.0 -Werror into tessera.metallib"
              }
            ]
          }
        ]
      ]
    }
  ]
}
