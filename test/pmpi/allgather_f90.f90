! An unmodified Fortran 90 MPI program (use mpi): MPI_ALLGATHER of double
! precision, MPI_ALLGATHERV with MPI_IN_PLACE and zero counts, MPI_IALLGATHERV +
! MPI_WAITALL, and a split sub-communicator. Aborts on a wrong value.
program agxf90
  use mpi
  implicit none
  integer :: ierr, rank, np, i, j, at, sub, subrank, subnp, nbad
  integer :: reqs(2), statuses(MPI_STATUS_SIZE, 2)
  integer, allocatable :: counts(:), displs(:), ibuf(:), ibuf2(:)
  double precision :: dsend(3)
  double precision, allocatable :: drecv(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  nbad = 0

  ! double precision, out of place
  allocate(drecv(3 * np))
  dsend = [(rank + 0.25d0 * j, j = 1, 3)]
  call MPI_Allgather(dsend, 3, MPI_DOUBLE_PRECISION, drecv, 3, MPI_DOUBLE_PRECISION, &
                     MPI_COMM_WORLD, ierr)
  do i = 0, np - 1
    do j = 1, 3
      if (drecv(3 * i + j) /= i + 0.25d0 * j) nbad = nbad + 1
    end do
  end do

  ! allgatherv in place: rank i owns mod(i+1, 3) * 2 integers, blocks in rank order
  allocate(counts(np), displs(np))
  at = 0
  do i = 0, np - 1
    counts(i + 1) = mod(i + 1, 3) * 2
    displs(i + 1) = at
    at = at + counts(i + 1)
  end do
  allocate(ibuf(max(at, 1)), ibuf2(max(at, 1)))
  ibuf = -1
  do j = 1, counts(rank + 1)
    ibuf(displs(rank + 1) + j) = rank * 100 + j
  end do
  call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ibuf, counts, displs, MPI_INTEGER, &
                      MPI_COMM_WORLD, ierr)
  call check_v(ibuf)

  ! two nonblocking allgathervs completed by MPI_Waitall
  ibuf = -1
  ibuf2 = -1
  call MPI_Iallgatherv([(rank * 100 + j, j = 1, counts(rank + 1))], counts(rank + 1), &
                       MPI_INTEGER, ibuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Iallgatherv([(rank * 100 + j, j = 1, counts(rank + 1))], counts(rank + 1), &
                       MPI_INTEGER, ibuf2, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, statuses, ierr)
  call check_v(ibuf)
  call check_v(ibuf2)

  ! a sub-communicator: even and odd ranks, reversed order
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), np - rank, sub, ierr)
  call MPI_Comm_rank(sub, subrank, ierr)
  call MPI_Comm_size(sub, subnp, ierr)
  deallocate(ibuf)
  allocate(ibuf(subnp))
  call MPI_Allgather(rank, 1, MPI_INTEGER, ibuf, 1, MPI_INTEGER, sub, ierr)
  do i = 1, subnp
    ! sub rank i-1 is the world rank with the same parity, counted from the top
    if (ibuf(i) /= np - 1 - mod(np - 1 - mod(rank, 2), 2) - 2 * (i - 1)) nbad = nbad + 1
  end do
  call MPI_Comm_free(sub, ierr)

  if (nbad /= 0) then
    print *, 'rank', rank, ': FAILED checks:', nbad
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end if
  if (rank == 0) print '(a,i3,a)', 'allgather_f90:', np, ' ranks: OK'
  call MPI_Finalize(ierr)

contains

  subroutine check_v(buf)
    integer, intent(in) :: buf(:)
    integer :: b, k
    do b = 0, np - 1
      do k = 1, counts(b + 1)
        if (buf(displs(b + 1) + k) /= b * 100 + k) nbad = nbad + 1
      end do
    end do
  end subroutine check_v

end program agxf90
