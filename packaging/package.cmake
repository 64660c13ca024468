# packaging/package.cmake — Debian packages with CPack (scripts/package runs it):
#   idem-coordinator  the server and idemctl, a hardened systemd unit reading /etc/idem/idem.env,
#                     man pages made from --help (help2man)
#   libidem0          libidem.so.0
#   libidem-dev       the headers, libidem.so, idem.pc, the CMake package, libidem_pg.a
# The unit, the env file and the man pages are installed only into the package
# (EXCLUDE_FROM_ALL): a `cmake --install` into a prefix stays what it was.
include(GNUInstallDirs)

install(FILES ${CMAKE_CURRENT_LIST_DIR}/idem-coordinator.service
  DESTINATION lib/systemd/system COMPONENT coordinator EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/idem.env
  DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/idem COMPONENT coordinator EXCLUDE_FROM_ALL)

# man pages: `cmake --build B --target man` (needs help2man), before cpack
find_program(HELP2MAN help2man)
set(IDEM_MAN_DIR ${CMAKE_BINARY_DIR}/man)
if(HELP2MAN)
  add_custom_target(man
    COMMAND ${CMAKE_COMMAND} -E make_directory ${IDEM_MAN_DIR}
    COMMAND ${HELP2MAN} -N --no-discard-stderr --version-string=${IDEM_BUILD_VERSION}
            -n "the idem idempotency coordinator for saga steps"
            -o ${IDEM_MAN_DIR}/idem-coordinator.1 $<TARGET_FILE:idem-coordinator>
    COMMAND ${HELP2MAN} -N --no-discard-stderr --version-string=${IDEM_BUILD_VERSION}
            -n "incident response for idem: steps, sagas, resolutions, policies, audit"
            -o ${IDEM_MAN_DIR}/idemctl.1 $<TARGET_FILE:idemctl>
    COMMAND gzip -9nf ${IDEM_MAN_DIR}/idem-coordinator.1 ${IDEM_MAN_DIR}/idemctl.1
    DEPENDS idem-coordinator idemctl
    COMMENT "help2man: idem-coordinator.1, idemctl.1")
endif()
install(FILES ${IDEM_MAN_DIR}/idem-coordinator.1.gz ${IDEM_MAN_DIR}/idemctl.1.gz
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT coordinator EXCLUDE_FROM_ALL OPTIONAL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME idem)
# the build's version (CMakeLists.txt), "~" for SemVer's "-" so that dpkg sorts a pre-release first
set(CPACK_PACKAGE_VERSION ${IDEM_DEB_VERSION})
set(CPACK_PACKAGE_CONTACT "idem maintainers <idem@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "idempotency coordinator for saga workflows")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL coordinator lib dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON) # Depends from the binaries' shared libraries
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME idem-coordinator)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_SECTION net)
set(CPACK_COMPONENT_COORDINATOR_DESCRIPTION
  "idempotency coordinator for saga workflows\n idem-coordinator answers, for every step of a saga, whether to run it, replay its\n stored result or wait; state in PostgreSQL, leader election through etcd. Includes\n idemctl (incident response) and a hardened systemd unit (/etc/idem/idem.env).")
# postinst: an upgrade restarts a running unit on the new binary (docs/upgrading.md)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_CONTROL_EXTRA
  "${CMAKE_CURRENT_LIST_DIR}/conffiles;${CMAKE_CURRENT_LIST_DIR}/postinst")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE) # maintainer scripts 0755
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libidem0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_LIB_DESCRIPTION
  "C client library of the idem coordinator\n libidem: BeginSaga, BeginStep, CompleteStep and idem_step_run over gRPC.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libidem-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# idem.pc names grpc, libprotobuf-c and libcrypto (Requires.private): pkg-config needs their .pc
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libidem0 (= ${IDEM_DEB_VERSION}), libgrpc-dev, libprotobuf-c-dev, libssl-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "C client library of the idem coordinator: development files\n <idem/idem.h>, libidem.so, idem.pc and the CMake package idem::idem.")
include(CPack)
