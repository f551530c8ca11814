! MPI_ALLOC_MEM / MPI_FREE_MEM from `use mpi` under libagx_pmpi.so: the memory must be
! agx's (a mapping of its memory file, /memfd:agx-allocate in /proc/self/maps), both with
! an INTEGER(KIND=MPI_ADDRESS_KIND) and a TYPE(C_PTR) BASEPTR, and MPI_ALLGATHER into it
! (out of place and in place) must deliver every rank's block.
program alloc_mem_f90
  use mpi
  use, intrinsic :: iso_c_binding
  implicit none
  integer, parameter :: n = 140000  ! (560,000 bytes a rank: at least a direct-write buffer)
  integer :: ierr, rank, nranks, i, r, failures, total, pass
  integer(kind=MPI_ADDRESS_KIND) :: bytes, address
  type(c_ptr) :: p
  integer, pointer :: recv(:)
  integer :: send(n)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  failures = 0
  bytes = int(n, MPI_ADDRESS_KIND) * nranks * 4
  do pass = 1, 2
    if (pass == 1) then
      call MPI_ALLOC_MEM(bytes, MPI_INFO_NULL, address, ierr)
      p = transfer(address, p)
    else
      call MPI_ALLOC_MEM(bytes, MPI_INFO_NULL, p, ierr)
    end if
    if (ierr /= MPI_SUCCESS) failures = failures + 1
    call c_f_pointer(p, recv, [n * nranks])
    if (.not. agx_mapping(transfer(p, address))) then
      print '(a,i0,a,i0)', 'rank ', rank, ': FAIL MPI_ALLOC_MEM memory is not agx''s, pass ', pass
      failures = failures + 1
    end if
    do i = 1, n
      send(i) = rank * 1000000 + i + pass
    end do
    recv = -1
    call MPI_ALLGATHER(send, n, MPI_INTEGER, recv, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    call check('out of place')
    recv = -1
    recv(rank * n + 1 : rank * n + n) = send
    call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    call check('in place')
    call MPI_FREE_MEM(recv, ierr)
    if (ierr /= MPI_SUCCESS) failures = failures + 1
  end do
  call MPI_ALLREDUCE(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) print '(a,i0,a)', 'OK on ', nranks, ' rank(s)'
  call MPI_FINALIZE(ierr)
  if (total /= 0) stop 1

contains

  subroutine check(what)
    character(*), intent(in) :: what
    do r = 0, nranks - 1
      do i = 1, n
        if (recv(r * n + i) /= r * 1000000 + i + pass) then
          print '(a,i0,a,a,a,i0)', 'rank ', rank, ': FAIL ', what, ': wrong element of block ', r
          failures = failures + 1
          return
        end if
      end do
    end do
  end subroutine check

  ! Whether `at` lies in a mapping of agx's memory file.
  logical function agx_mapping(at)
    integer(kind=MPI_ADDRESS_KIND), intent(in) :: at
    character(len=512) :: line
    integer(kind=8) :: lo, hi
    integer :: unit, stat, dash, space
    agx_mapping = .false.
    open(newunit=unit, file='/proc/self/maps', action='read', iostat=stat)
    if (stat /= 0) return
    do
      read(unit, '(a)', iostat=stat) line
      if (stat /= 0) exit
      if (index(line, 'memfd:agx-allocate') == 0) cycle
      dash = index(line, '-')
      space = index(line, ' ')
      read(line(1:dash - 1), '(z16)') lo
      read(line(dash + 1:space - 1), '(z16)') hi
      if (at >= lo .and. at < hi) agx_mapping = .true.
    end do
    close(unit)
  end function agx_mapping
end program alloc_mem_f90
